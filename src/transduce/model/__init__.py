"""The Transformer: attention, embeddings, layers, cache and the assemblies built from them."""

from .kinds import build_model
from .transformer import EncoderDecoder, EncoderOutput, LanguageModel

__all__ = ["EncoderDecoder", "EncoderOutput", "LanguageModel", "build_model"]
