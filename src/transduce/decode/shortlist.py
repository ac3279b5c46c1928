"""Vocabulary shortlists: score only the target tokens a batch's sources make plausible.

The output projection of a small model is a large share of each decoding step (d x vocab
multiply-adds per row, as much as the decoder layers at d=256 and 8000 tokens). A shortlist,
built once from the training data, lists per source token the target tokens that co-occur with
it most specifically, plus the most frequent target tokens; decoding a batch projects onto the
union of its sources' lists only (CTranslate2's `use_vmap`, Marian's lexical shortlist). Every
other token gets probability zero, so outputs may differ from full decoding: measure the cost.
An int8 model's listed rows are projected in float32 from their dequantized weights.

Specificity is the Dice coefficient over sentence pairs, 2 c(s, t) / (c(s) + c(t)), with c
counting the pairs a token appears in: unlike p(t | s) it does not rank the frequent tokens
(punctuation, articles) first for every source token, and those are in the frequent list anyway.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from torch import Tensor, nn

from ..data.vocab import BOS, EOS, PAD, UNK, Vocab
from ..fileio import atomic_file, write_safetensors

FORMAT = "transduce-shortlist/1"
CHUNK = 20_000  # sentence pairs counted at once


class ShortlistError(ValueError):
    """A shortlist file that is missing, corrupt, or built for other vocabularies."""


class Shortlist:
    """Per source token the target ids worth scoring ((src_vocab, k), -1 for none), and the
    target ids always scored."""

    def __init__(self, per_token: Tensor, frequent: Tensor, tgt_vocab_size: int) -> None:
        self.per_token, self.frequent, self.tgt_vocab_size = per_token, frequent, tgt_vocab_size

    @property
    def src_vocab_size(self) -> int:
        return self.per_token.shape[0]

    def allowed(self, src: Tensor, extra: Iterable[int] = ()) -> Tensor:
        """Sorted distinct target ids for a batch of sources (batch, m): their tokens' lists, the
        frequent tokens, EOS and `extra` (forced prefix tokens)."""
        ids = src[src.ne(PAD)].clamp(max=self.src_vocab_size - 1)
        listed = self.per_token[ids.cpu()].flatten()
        always = torch.tensor([EOS, *extra], dtype=torch.int64)
        chosen = torch.cat([listed[listed.ge(0)].long(), self.frequent.long(), always])
        return torch.unique(chosen).to(src.device)

    def save(self, path: Path) -> None:
        """One safetensors file, written to a temporary name and renamed into place (a full disk
        is a fileio.WriteError naming `path`)."""
        with atomic_file(path) as tmp:
            write_safetensors(
                tmp,
                {"per_token": self.per_token.contiguous(), "frequent": self.frequent.contiguous()},
                metadata={"format": FORMAT, "tgt_vocab_size": str(self.tgt_vocab_size)},
            )

    @classmethod
    def load(cls, path: Path) -> Shortlist:
        if not path.is_file():
            raise ShortlistError(f"{path}: no such shortlist file")
        try:
            with safe_open(str(path), "pt") as f:
                header = f.metadata() or {}
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ShortlistError(f"{path}: not a readable shortlist ({exc})") from None
        per_token, frequent = tensors.get("per_token"), tensors.get("frequent")
        if header.get("format") != FORMAT or per_token is None or frequent is None:
            raise ShortlistError(f"{path}: not a shortlist written by `transduce shortlist`")
        size = int(header.get("tgt_vocab_size", "0")) if header.get("tgt_vocab_size", "").isdigit() else 0
        shapes = per_token.dim() == 2 and frequent.dim() == 1
        integers = not (per_token.is_floating_point() or frequent.is_floating_point())
        top = max((int(t.max()) for t in (per_token, frequent) if t.numel()), default=-1)
        if not (shapes and integers and top < size):
            raise ShortlistError(f"{path}: malformed shortlist (ids outside its target vocabulary)")
        return cls(per_token, frequent, size)

    def projection(self, model: nn.Module) -> tuple[Tensor, Tensor | None]:
        """The output matrix and bias of the model the shortlist is to decode with, once it is
        known to fit (ValueError otherwise: not one encoder-decoder, or other vocabularies)."""
        if not hasattr(model, "decode_states"):
            raise ValueError(
                "a shortlist applies to one encoder-decoder model, not to an ensemble, a language "
                "model or a classifier"
            )
        weight, bias = output_matrix(model)
        self.check_model(model.src_embed.tokens.num_embeddings, weight.shape[0], "--shortlist")
        return weight, bias

    def check_model(self, src_vocab_size: int, tgt_vocab_size: int, where: str) -> None:
        """ShortlistError unless the shortlist was built for these vocabulary sizes."""
        if (self.src_vocab_size, self.tgt_vocab_size) != (src_vocab_size, tgt_vocab_size):
            raise ShortlistError(
                f"{where}: the shortlist is for vocabularies of {self.src_vocab_size} (source) and "
                f"{self.tgt_vocab_size} (target) entries; the model has {src_vocab_size} and "
                f"{tgt_vocab_size}: build it from the model's own training data"
            )

    def vmap(self, src_vocab: Vocab, tgt_vocab: Vocab) -> list[str]:
        """The shortlist as CTranslate2's vocabulary map for a model of these vocabularies (checked
        first): `source token<TAB>target tokens` per listed source token, and the always-scored
        tokens under the empty key (CTranslate2 adds its own UNK, BOS and EOS; our special tokens
        are left out)."""
        self.check_model(len(src_vocab), len(tgt_vocab), "--shortlist")
        specials = {PAD, UNK, BOS, EOS}

        def pieces(ids: list[int]) -> str:
            return " ".join(tgt_vocab.token(i) for i in ids if i >= 0 and i not in specials)

        lines = [f"\t{pieces(self.frequent.tolist())}"]
        for source, row in enumerate(self.per_token.tolist()):
            listed = pieces(row)
            if source not in specials and listed:
                lines.append(f"{src_vocab.token(source)}\t{listed}")
        return lines


def build_shortlist(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    src_vocab_size: int,
    tgt_vocab_size: int,
    per_token: int = 50,
    frequent: int = 100,
) -> Shortlist:
    """Count, over sentence pairs of ids, the pairs each source token, target token and (source,
    target) combination appears in; keep per source token its `per_token` target tokens of highest
    Dice coefficient (ties: lower id first) and the `frequent` most frequent target tokens."""
    src_count = np.zeros(src_vocab_size, dtype=np.int64)
    tgt_count = np.zeros(tgt_vocab_size, dtype=np.int64)
    tgt_tokens = np.zeros(tgt_vocab_size, dtype=np.int64)
    keys: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    chunk: list[np.ndarray] = []
    for n, (src, tgt) in enumerate(pairs, 1):
        s, t = np.unique(np.asarray(src, dtype=np.int64)), np.asarray(tgt, dtype=np.int64)
        np.add.at(tgt_tokens, t, 1)
        t = np.unique(t)
        src_count[s] += 1
        tgt_count[t] += 1
        chunk.append((s[:, None] * tgt_vocab_size + t[None, :]).ravel())
        if n % CHUNK == 0:
            _merge(chunk, keys, counts)
    _merge(chunk, keys, counts)
    key, count = _combine(keys, counts)
    s, t = key // tgt_vocab_size, key % tgt_vocab_size
    dice = 2.0 * count / (src_count[s] + tgt_count[t])
    order = np.lexsort((t, -dice, s))  # by source, best first, lower id on ties
    s, t = s[order], t[order]
    first = np.searchsorted(s, s, side="left")
    rank = np.arange(len(s)) - first
    keep = rank < per_token
    table = torch.full((src_vocab_size, per_token), -1, dtype=torch.int32)
    table[torch.from_numpy(s[keep]), torch.from_numpy(rank[keep])] = torch.from_numpy(t[keep]).int()
    top = np.lexsort((np.arange(tgt_vocab_size), -tgt_tokens))[:frequent]
    top = top[tgt_tokens[top] > 0]
    return Shortlist(table, torch.from_numpy(np.sort(top)).int(), tgt_vocab_size)


def _merge(chunk: list[np.ndarray], keys: list[np.ndarray], counts: list[np.ndarray]) -> None:
    if chunk:
        key, count = np.unique(np.concatenate(chunk), return_counts=True)
        keys.append(key)
        counts.append(count)
        chunk.clear()


def _combine(keys: list[np.ndarray], counts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    return key, np.bincount(inverse, weights=np.concatenate(counts)).astype(np.int64)


def output_matrix(model: nn.Module) -> tuple[Tensor, Tensor | None]:
    """The float (vocab, d) weight and bias of an encoder-decoder's output projection, in
    whichever form decoding gave it (as trained, plain, packed for oneDNN or int8)."""
    output: Any = model.output
    weight, bias = output.weight, output.bias
    return weight.detach().float(), None if bias is None else bias.detach().float()


class Shortlisted:
    """An encoder-decoder that scores only `vocab` (sorted target ids): search's `Seq2Seq`, with
    every other token at -inf, so search itself is unchanged."""

    kind = "encoder_decoder"

    def __init__(self, model: nn.Module, vocab: Tensor, weight: Tensor, bias: Tensor | None) -> None:
        self.model, self.vocab, self.size = model, vocab, weight.shape[0]
        self.weight = weight.index_select(0, vocab).contiguous()
        self.bias = None if bias is None else bias.index_select(0, vocab)

    def encode(self, src: Tensor, **source: Tensor) -> Any:
        return self.model.encode(src, **source)

    def new_cache(self) -> Any:
        return self.model.new_cache()

    def decode(self, tgt: Tensor, memory: Any, cache: Any = None) -> Tensor:
        states = self.model.decode_states(tgt, memory, cache)
        scored = nn.functional.linear(states, self.weight.to(states.dtype), self.bias)
        logits = scored.new_full((*scored.shape[:-1], self.size), -math.inf)
        return logits.index_copy_(-1, self.vocab, scored)
