"""Validation metrics per kind of data: what a model is judged by besides its dev loss.

Generated tasks: character and sequence accuracy on `dev` and on the longer `test_long` (for
a language model on `repeat`, of its continuations of the prompts); labels: label accuracy on
`dev` (and on `test_long` where there is one); parsing: labelled bracket F1 on `dev` (EVALB
conventions); text: BLEU and chrF on `dev`. Each decodes greedily with the model being trained.
`Validator` holds what a run validates with, given once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..config import DecodeConfig
from ..data.batching import make_batches
from ..data.dataset import Dataset, Split
from ..data.languages import LanguagePair
from ..decode.torch_engine import decode_all
from ..metrics import Accuracy, accuracy, corpus_scores, perplexity
from ..parsing import gold_tree, score_outputs
from ..store.checkpoint import load_weights
from .loss import label_smoothed_loss
from .objective import IGNORE, Objective

Metrics = dict[str, float]


@dataclass(frozen=True)
class DevPass:
    """One teacher-forced pass over a split: the loss, ACT's step statistics, and how often the
    argmax at each target position is the reference's token (`forced`; what tensor2tensor's
    evaluation reports by default, where no error compounds as it does in decoding)."""

    loss: float  # per token, label-smoothed
    nll: float  # per token
    ponder: Metrics  # ACT steps, mean and max per side
    forced: Accuracy  # char: right positions over scored ones; sequence: every position right


@torch.no_grad()
def dev_loss(
    model: nn.Module,
    objective: Objective,
    split: Split,
    max_tokens: int,
    smoothing: float,
    device: torch.device,
) -> DevPass:
    """The teacher-forced pass over a split (model.eval(), batches of `max_tokens`)."""
    model.eval()
    batches, _ = make_batches(objective.lengths(split), max_tokens, seed=0)
    loss_sum = nll_sum = 0.0
    tokens = right = exact = 0
    steps: dict[str, list[Tensor]] = {}
    for idx in batches:
        b = objective.collate(split, idx)
        target = objective.targets(b).to(device)
        out = objective.forward(model, b.to(device))
        loss, nll = label_smoothed_loss(out.logits, target, smoothing, IGNORE)
        scored = target.ne(IGNORE)
        hit = out.logits.argmax(-1).eq(target) | ~scored
        loss_sum, nll_sum = loss_sum + float(loss), nll_sum + float(nll)
        tokens += int(scored.sum())
        right += int((hit & scored).sum())
        exact += int(hit.all(-1).sum())
        for side, p in out.ponder.items():
            steps.setdefault(side, []).append(p.real(p.steps))
    model.train()
    ponder = {}
    for side, parts in steps.items():
        joined = torch.cat(parts)
        ponder[f"{side}_ponder_mean"], ponder[f"{side}_ponder_max"] = (
            float(joined.mean()),
            float(joined.max()),
        )
    forced = Accuracy(right / max(tokens, 1), exact / max(len(split), 1))
    return DevPass(loss_sum / max(tokens, 1), nll_sum / max(tokens, 1), ponder, forced)


def greedy_outputs(
    model: nn.Module, split: Split, options: DecodeConfig, limit: int | None = None
) -> tuple[list[list[int]], list[list[int]]]:
    """Greedy outputs (on the model's device) and references for the first `limit` examples of a
    split."""
    n = len(split) if limit is None else min(limit, len(split))
    sources = [split.pair(i)[0].tolist() for i in range(n)]
    refs = [split.pair(i)[1].tolist() for i in range(n)]
    annotations = [split.annotation(i) for i in range(n)] if split.annotated else None
    greedy = options.model_copy(update={"search": "greedy"})
    hyps = decode_all(model, sources, greedy, annotations=annotations)
    return [h[0].tokens if h else [] for h in hyps], refs


Predict = Callable[[Split], tuple[list[list[int]], list[list[int]]]]


def task_metrics(data: Dataset, predict: Predict) -> Metrics:
    out: Metrics = {}
    for name in ("dev", "test_long"):
        acc = accuracy(*predict(data.splits[name]))
        out[f"{name}_char_acc"], out[f"{name}_seq_acc"] = acc.char, acc.sequence
    return out


def label_metrics(data: Dataset, predict: Predict) -> Metrics:
    """The share of labels predicted right (per sequence or per token, as the data labels)."""
    return {
        f"{name}_acc": accuracy(*predict(data.splits[name])).char
        for name in ("dev", "test_long")
        if name in data.splits
    }


def parse_metrics(data: Dataset, predict: Predict) -> Metrics:
    preds, _ = predict(data.splits["dev"])
    golds = [gold_tree(line) for line in data.gold_trees("dev")]
    score, _ = score_outputs(data.tgt_vocab, preds, golds, data.meta.parse_root or "S")
    return {"dev_f1": score.f1, "dev_precision": score.precision, "dev_recall": score.recall}


def text_metrics(data: Dataset, predict: Predict) -> Metrics:
    """BLEU and chrF on dev; on a multilingual dataset, per language pair (dev_bleu_en-de, ...)
    with dev_bleu and dev_chrf their means, so that no pair's size decides the best checkpoint."""
    preds, refs = predict(data.splits["dev"])
    decode = data.tgt_vocab.decode
    hyps, texts = [decode(p) for p in preds], [decode(r) for r in refs]
    pairs = data.pair_ids.get("dev")
    if pairs is None or len(data.meta.languages) < 2:
        scores = corpus_scores(hyps, texts)
        return {"dev_bleu": scores.bleu, "dev_chrf": scores.chrf}
    out: Metrics = {}
    for k, pair in enumerate(data.meta.languages):
        rows = np.flatnonzero(pairs == k).tolist()
        if rows:
            scores = corpus_scores([hyps[i] for i in rows], [texts[i] for i in rows])
            out[f"dev_bleu_{pair.name}"], out[f"dev_chrf_{pair.name}"] = scores.bleu, scores.chrf
    for metric in ("bleu", "chrf"):
        values = [v for key, v in out.items() if key.startswith(f"dev_{metric}_")]
        out[f"dev_{metric}"] = float(np.mean(values))
    return out


# What train.best_metric may name for each kind of data, besides loss and ppl (logged as dev_<name>).
BEST_METRICS = {
    "task": ("char_acc", "seq_acc"),
    "labels": ("acc",),
    "parse": ("f1",),
    "text": ("bleu", "chrf"),
}
LOWER_IS_BETTER = ("loss", "ppl")


def check_best_metric(metric: str, data_kind: str) -> None:
    """ValueError unless validation on this kind of data computes `metric`."""
    allowed = (*LOWER_IS_BETTER, *BEST_METRICS[data_kind])
    if metric not in allowed:
        raise ValueError(
            f"train.best_metric={metric!r} is not computed on {data_kind} data; allowed: {', '.join(allowed)}"
        )


def check_best_pair(pair: str | None, languages: list[LanguagePair]) -> None:
    """ValueError unless train.best_pair is unset or names one of the dataset's pairs."""
    if pair is None:
        return
    names = [p.name for p in languages]
    if len(names) < 2:
        raise ValueError(f"train.best_pair={pair} needs a dataset of several pairs (prepare --pair ...)")
    if pair not in names:
        raise ValueError(f"train.best_pair={pair} is not a pair of the dataset; allowed: {', '.join(names)}")


def improves(metric: str, value: float, best: float | None) -> bool:
    """Whether a validation's `value` of `metric` beats the best so far (strictly)."""
    if best is None:
        return True
    return value < best if metric in LOWER_IS_BETTER else value > best


METRICS: dict[str, Callable[[Dataset, Predict], Metrics]] = {
    "task": task_metrics,
    "labels": label_metrics,
    "parse": parse_metrics,
    "text": text_metrics,
}


class Validator:
    """The validation of the model being trained: the teacher-forced pass over a split, greedy
    outputs, the metrics of the data's kind, dev samples, and other weights in the model's place."""

    def __init__(
        self,
        *,
        data: Dataset,
        model: nn.Module,
        objective: Objective,
        device: torch.device,
        decode: DecodeConfig,
        max_tokens: int,
        label_smoothing: float,
    ) -> None:
        self.data, self.model, self.objective, self.device = data, model, objective, device
        self.decode, self.max_tokens, self.label_smoothing = decode, max_tokens, label_smoothing
        self.metrics = METRICS[data.meta.data_kind]

    def dev_loss(self, split: Split) -> DevPass:
        """The teacher-forced pass over a split: loss, NLL, ACT step statistics, argmax accuracy."""
        return dev_loss(self.model, self.objective, split, self.max_tokens, self.label_smoothing, self.device)

    def predict(self, split: Split, limit: int | None = None) -> tuple[list[list[int]], list[list[int]]]:
        """Greedy outputs and references for the first `limit` examples of a split."""
        return greedy_outputs(self.model, split, self.decode, limit)

    def samples(self, count: int) -> list[tuple[str, str, str]]:
        """The first `count` dev examples as (source, reference, greedy output) text."""
        split = self.data.splits["dev"]
        preds, refs = self.predict(split, limit=count)
        src, tgt = self.data.src_vocab, self.data.tgt_vocab
        return [
            (src.decode(split.pair(i)[0].tolist()), tgt.decode(ref), tgt.decode(pred))
            for i, (pred, ref) in enumerate(zip(preds, refs, strict=True))
        ]

    def scores(self) -> Metrics:
        """Dev loss and perplexity, ACT statistics, and the metrics of the data's kind."""
        dev = self.dev_loss(self.data.splits["dev"])
        return {
            "dev_loss": dev.loss,
            "dev_ppl": perplexity(dev.nll, 1),
            "dev_forced_acc": dev.forced.char,  # teacher-forced token accuracy, as OpenNMT-py logs it
            **dev.ponder,
            **self.metrics(self.data, self.predict),
        }

    @contextlib.contextmanager
    def weights_in_place(self, weights: dict[str, Tensor]) -> Iterator[None]:
        """Other weights (an average) in the model's place for the block; the trained ones after."""
        trained = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        load_weights(self.model, weights)
        try:
            yield
        finally:
            self.model.load_state_dict(trained)
