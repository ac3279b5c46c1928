"""Data: vocabularies, corpus validation, binarised datasets, batching and generated tasks."""
