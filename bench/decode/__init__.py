"""Decoding speed against Hugging Face `generate` and CTranslate2, and what int8 costs in quality."""
