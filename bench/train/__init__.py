"""Training throughput on the CPU against a Hugging Face MarianMTModel."""
