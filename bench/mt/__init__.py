"""Translation quality on real data: against a Hugging Face MarianMTModel, our CPU recipes, the peer
toolkits' recipes, and domain adaptation."""
