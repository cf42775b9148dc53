"""Generation's GPU paths: the loop test's every-shift comparison and LoopEnd on CUDA tensors, and
`--static-cache` (whose decoding step transformers compiles on a GPU) giving the dynamic cache's greedy
tokens on the pipeline's kind of model (LFM2 shape, tiny preset, random init)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelwright.generation import LoopEnd, periodic, periodic_each_shift

EOS, PAD = 2, 0


@pytest.mark.gpu
def test_the_loop_test_and_loop_end_agree_on_cuda() -> None:
    gen = torch.Generator().manual_seed(5)
    rows = [torch.tensor([4, 8, 9] * 86)[:256], torch.randint(3, 50, (256,), generator=gen)]
    rows += [torch.randint(0, 2, (256,), generator=gen) for _ in range(300)]
    tail = torch.stack(rows)
    assert periodic(tail.cuda(), 64).cpu().tolist() == periodic_each_shift(tail, 64).tolist()
    scores = torch.zeros(len(rows), 60, device="cuda")
    forced = LoopEnd(prompt_len=0, eos_token_id=EOS)(tail.cuda(), scores)  # type: ignore[arg-type]
    assert forced[0].argmax().item() == EOS and torch.equal(forced[1], scores[1])


def _lfm2_tiny() -> Any:
    from transformers import AutoModelForCausalLM

    from kernelwright.base_model.config import SIZES
    from kernelwright.base_model.pretrain import model_config

    preset = SIZES["tiny"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(model_config(preset, preset.vocab_size, 1, EOS, PAD),
                                             dtype=torch.float32)
    with torch.no_grad():  # every greedy choice decided by 4.8 logits or more: no rounding flips one
        model.get_input_embeddings().weight.mul_(3.0)
    return model.eval()


@pytest.mark.gpu
def test_a_static_cache_gives_the_dynamic_caches_greedy_tokens_on_cuda() -> None:
    model = _lfm2_tiny().cuda()
    ids = torch.randint(3, 400, (3, 40), generator=torch.Generator().manual_seed(1)).cuda()
    mask = torch.ones_like(ids)
    mask[0, :8] = 0  # left padding, as evaluation batches prompts
    ids[0, :8] = PAD
    runs = []
    with torch.inference_mode():
        for cache in ({}, {"cache_implementation": "static"}):
            runs.append(model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=48, min_new_tokens=48,
                                       do_sample=False, pad_token_id=PAD, eos_token_id=EOS, output_logits=True,
                                       return_dict_in_generate=True, **cache))
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    dynamic, static = (torch.stack(r.logits, 1) for r in runs)  # each step's logits: what the cache held
    assert torch.allclose(dynamic, static, rtol=1e-3, atol=1e-3)
