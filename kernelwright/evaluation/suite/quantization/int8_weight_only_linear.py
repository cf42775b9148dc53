"""Weight-only int8 linear: y = (x @ Wq^T) * w_scale[n] + bias[n]; Wq int8 (N, K), x float32."""
import torch
import torch.nn as nn

CATEGORY = "quantization"
DTYPE = "float32"
IN_FEATURES, OUT_FEATURES = 1024, 1536
SHAPES = [
    {"tokens": 4096},
    {"tokens": 1001},
    {"tokens": 7},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("w_q", torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8))
        self.register_buffer("w_scale", torch.rand(out_features) * 0.004 + 0.001)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w_q.to(x.dtype).t()) * self.w_scale + self.bias


def get_inputs(tokens: int = 4096):
    return [torch.randn(tokens, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]


def flops(tokens: int = 4096) -> float:
    return 2.0 * tokens * OUT_FEATURES * IN_FEATURES + 2.0 * tokens * OUT_FEATURES


def bytes_moved(tokens: int = 4096) -> float:
    # int8 weights (1 B), float32 activations, scales, bias and output
    return (4.0 * tokens * IN_FEATURES + 1.0 * OUT_FEATURES * IN_FEATURES + 4.0 * 2 * OUT_FEATURES
            + 4.0 * tokens * OUT_FEATURES)
