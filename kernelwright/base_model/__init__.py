"""The code-pretrained base model that CuSeT's confidences come from.

    kernelwright base-model pretrain [--size micro|tiny|small] [--minutes N] [--out DIR]

`corpus` (the installed packages' code, decontaminated), `tokenizer` (byte-level BPE, packed
blocks), `loop` (next-token loss, cosine schedule, resumable checkpoints), `perplexity` (held-out
seed figures) and `pretrain` (the command, reuse by corpus digest and config, MLflow).
"""
