"""Decoding: search over a model's cached decoder, batched translation of text."""
