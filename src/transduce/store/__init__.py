"""Checkpoints on disk: writing and verifying them, their typed metadata, averaging, and
loading a model for decoding. Used alike by training, decoding, interop and serving."""
