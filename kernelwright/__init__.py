"""kernelwright: curate a CUDA corpus, CuSeT-tune a code LLM, GPU-verify its kernels, serve it."""

__version__ = "0.1.0"
