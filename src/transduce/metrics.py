"""Metrics: BLEU/chrF through sacrebleu, perplexity, character and sequence accuracy."""

from __future__ import annotations

import math
from dataclasses import dataclass

import sacrebleu


@dataclass
class Accuracy:
    char: float
    sequence: float


def accuracy(predictions: list[list[int]], references: list[list[int]]) -> Accuracy:
    """Character accuracy: matching positions over max(len(pred), len(ref)), micro-averaged;
    sequence accuracy: exact matches over examples (the UT paper's algorithmic metrics)."""
    right = total = exact = 0
    for pred, ref in zip(predictions, references, strict=True):
        right += sum(p == r for p, r in zip(pred, ref, strict=False))
        total += max(len(pred), len(ref), 1)
        exact += pred == ref
    n = max(len(references), 1)
    return Accuracy(right / max(total, 1), exact / n)


def perplexity(nll_sum: float, tokens: int) -> float:
    return math.exp(min(nll_sum / max(tokens, 1), 100.0))


@dataclass
class BleuReport:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    tokenized_bleu: float


def corpus_scores(hypotheses: list[str], references: list[str], *more: list[str]) -> BleuReport:
    """Detokenised BLEU and chrF with signatures, plus BLEU over `intl`-tokenised text,
    closer to the tokenised BLEU that papers report. `more`: further reference sets, as
    sacrebleu takes them; every set must have one line per hypothesis."""
    streams = [references, *more]
    for number, refs in enumerate(streams, 1):
        if len(refs) != len(hypotheses):
            raise ValueError(f"reference set {number} has {len(refs)} lines for {len(hypotheses)} hypotheses")
    if not hypotheses:
        raise ValueError("nothing to score: no hypotheses")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, streams)
    c = chrf.corpus_score(hypotheses, streams)
    tok = sacrebleu.metrics.BLEU(tokenize="intl").corpus_score(hypotheses, streams)
    return BleuReport(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), tok.score)
