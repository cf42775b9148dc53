"""The one chat format shared by curation, training, evaluation and serving.

A sample is a conversation: a system message, a user message holding the PyTorch reference
(KernelBench format), and the assistant's answer: a Python file defining `ModelNew` whose work
is done by CUDA kernels built with `load_inline`.
"""

from __future__ import annotations

import re

# the special tokens and chat template of every tokenizer kernelwright trains (ChatML)
BOS, EOS, PAD = "<|endoftext|>", "<|im_end|>", "<|pad|>"
SPECIAL_TOKENS = [BOS, "<|im_start|>", EOS, PAD]
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SYSTEM_PROMPT = (
    "You write fast, correct CUDA kernels. Given a PyTorch Model, answer with one Python file that "
    "defines ModelNew with the same constructor and forward signatures, doing the work in custom "
    "__global__ kernels built with torch.utils.cpp_extension.load_inline. No PyTorch fallback."
)


def user_message(reference_code: str) -> str:
    return f"Write ModelNew for this PyTorch model:\n```python\n{reference_code.strip()}\n```"


def prompt_messages(reference_code: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(reference_code)},
    ]


def completion_text(solution_code: str) -> str:
    return f"```python\n{solution_code.strip()}\n```"


_FENCE = re.compile(r"```(?:python|py)?\n(.*?)(?:```|\Z)", re.DOTALL)


def code_span(completion: str) -> tuple[str, int]:
    """The Python file inside the first fenced block of a completion and its character offset
    (the whole text at offset 0 if there is no fence)."""
    m = _FENCE.search(completion)
    return (m.group(1), m.start(1)) if m else (completion, 0)


def extract_code(completion: str) -> str:
    return code_span(completion)[0]
