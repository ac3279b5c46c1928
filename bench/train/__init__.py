"""Training throughput on the CPU against a Hugging Face MarianMTModel; start-up on large datasets."""
