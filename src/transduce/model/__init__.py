"""The Transformer: attention, embeddings, layers, cache and the assemblies built from them."""

from .transformer import EncoderDecoder, EncoderOutput, LanguageModel, build_model

__all__ = ["EncoderDecoder", "EncoderOutput", "LanguageModel", "build_model"]
