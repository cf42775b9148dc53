"""Curation: ingest corpora, filter them, and score CUDA region sensitivity (CuSeT weights)."""
