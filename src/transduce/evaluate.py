"""Evaluating a checkpoint: on text with references, on a task split, as a classifier on
reference labels, or as a parser.

Each function decodes through the shared pipeline (decode/pipeline.py) and returns a report;
the CLI only prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import DecodeConfig
from .data.dataset import Dataset, DatasetError
from .data.kinds import data_kind
from .data.source import SourceAnnotation
from .data.tasks import SPLITS, generate_split
from .data.trees import Tree
from .data.vocab import FIRST_SYMBOL
from .decode.engine import Engine, Request
from .decode.pipeline import Loaded, decoding_engine, encode_lines, translate_lines
from .decode.shortlist import Shortlist
from .evalb import BracketScore
from .metrics import Accuracy, BleuReport, accuracy, corpus_scores, perplexity
from .parsing import score_outputs
from .store.load import LoadedModel


def reference_nll(
    engine: Engine,
    sources: list[list[int]],
    references: list[list[int]],
    options: DecodeConfig,
    annotations: list[SourceAnnotation] | None = None,
) -> tuple[float, int]:
    """Summed negative log-likelihood of the references (EOS included) given their non-empty
    sources, by forced decoding in batches of `options.max_tokens`, and the number of tokens
    scored (a language model's: its prompts' too; a classifier's: the labels)."""
    keep = [i for i, s in enumerate(sources) if s]
    request = Request(
        [sources[i] for i in keep],
        options,
        annotations=[annotations[i] for i in keep] if annotations is not None else None,
        targets=[references[i] for i in keep],
    )
    scores = engine.score(request)
    return -sum(s.log_prob for s in scores), sum(s.count for s in scores)


@dataclass
class TextReport:
    scores: BleuReport
    perplexity: float  # of the first reference set
    tokens: int
    hypotheses: list[str]  # the translations scored, one per source line


@dataclass
class AccuracyReport:
    """Accuracy of outputs (characters, or labels) and the perplexity of the references."""

    accuracy: Accuracy
    perplexity: float
    examples: int


def judge(
    engine: Engine,
    sources: list[list[int]],
    references: list[list[int]],
    options: DecodeConfig,
    on_batch: Callable[[int, int], None] | None = None,
) -> AccuracyReport:
    """Decode the sources and compare the best outputs with the references, token by token."""
    hyps = engine.decode(Request(sources, options, on_batch=on_batch))
    acc = accuracy([h[0].tokens if h else [] for h in hyps], references)
    nll, tokens = reference_nll(engine, sources, references, options)
    return AccuracyReport(acc, perplexity(nll, tokens), len(sources))


def evaluate_text(
    loaded: Loaded,
    sources: list[str],
    references: list[list[str]],
    options: DecodeConfig,
    *,
    trees: Path | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    shortlist: Shortlist | None = None,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
) -> TextReport:
    """BLEU/chrF of the model's (or ensemble's) translations against one or more reference sets,
    and the perplexity of the first set."""
    for number, refs in enumerate(references, 1):
        if len(refs) != len(sources):
            raise ValueError(f"reference set {number} has {len(refs)} lines, the source {len(sources)}")
    outputs, encoded = translate_lines(
        loaded,
        sources,
        options,
        trees=trees,
        on_batch=on_batch,
        shortlist=shortlist,
        scores=False,
        tgt_lang=tgt_lang,
        src_lang=src_lang,
    )
    hypotheses = [o[0].text for o in outputs]
    scores = corpus_scores(hypotheses, *references)
    reader, engine = decoding_engine(loaded)
    refs = [reader.tgt_vocab.encode(r) for r in references[0]]
    nll, tokens = reference_nll(engine, encoded.sources, refs, options, encoded.annotations)
    return TextReport(scores, perplexity(nll, tokens), tokens, hypotheses)


def split_pairs(loaded: LoadedModel, split: str) -> tuple[list[list[int]], list[list[int]]]:
    """Source and reference ids of a generated-task split: regenerated from the config, or read
    from the prepared dataset the model was trained on."""
    data = loaded.config.data
    if split not in SPLITS:
        raise ValueError(f"--split {split!r}: allowed: {', '.join(SPLITS)}")
    if data.task is not None:
        pairs = generate_split(data, split)
        return [loaded.src_vocab.encode(s) for s, _ in pairs], [loaded.tgt_vocab.encode(t) for _, t in pairs]
    if data_kind(loaded.meta.data_kind).own_splits and data.dataset is not None:
        try:
            found = Dataset(Path(data.dataset)).splits.get(split)
        except DatasetError as exc:
            raise ValueError(f"the model's dataset cannot be read: {exc}") from None
        if found is not None:
            pairs = [found.pair(i) for i in range(len(found))]
            return [s.tolist() for s, _ in pairs], [t.tolist() for _, t in pairs]
    raise ValueError(f"--split needs a generated-task model whose {split} split can be found")


def evaluate_split(
    loaded: Loaded,
    split: str,
    options: DecodeConfig,
    *,
    on_batch: Callable[[int, int], None] | None = None,
    shortlist: Shortlist | None = None,
) -> AccuracyReport:
    """Character (or label) and sequence accuracy, and perplexity, on a generated task's split."""
    reader, engine = decoding_engine(loaded, shortlist)
    sources, refs = split_pairs(reader, split)
    return judge(engine, sources, refs, options, on_batch)


def evaluate_labels(
    loaded: Loaded,
    sources: list[str],
    labels: list[str],
    options: DecodeConfig,
    on_batch: Callable[[int, int], None] | None = None,
) -> AccuracyReport:
    """A classifier's label accuracy (and whole-line accuracy) against reference label lines, and
    the perplexity of the reference labels. Empty lines with empty labels are left out."""
    if len(labels) != len(sources):
        raise ValueError(f"the labels have {len(labels)} lines, the source {len(sources)}")
    reader, engine = decoding_engine(loaded)
    encoded = encode_lines(reader, sources)
    refs = [reader.tgt_vocab.encode(line) for line in labels]
    _check_labels(reader, encoded.sources, refs)
    keep = [i for i, (src, ref) in enumerate(zip(encoded.sources, refs, strict=True)) if src or ref]
    if on_batch is not None and len(keep) < len(refs):
        on_batch(len(refs) - len(keep), 0)  # empty lines without labels: nothing to judge
    sources = [encoded.sources[i] for i in keep]
    return judge(engine, sources, [refs[i] for i in keep], options, on_batch=on_batch)


def _check_labels(reader: LoadedModel, sources: list[list[int]], refs: list[list[int]]) -> None:
    """ValueError naming the line whose labels the classifier cannot be judged on: unknown labels,
    or not one label per line (sequence classifier) or per source token (token classifier)."""
    vocab, per_token = reader.tgt_vocab, reader.config.model.classifier == "token"
    known = [vocab.token(i) for i in range(FIRST_SYMBOL, len(vocab))]
    for number, (src, ref) in enumerate(zip(sources, refs, strict=True), 1):
        if any(i < FIRST_SYMBOL for i in ref):
            raise ValueError(
                f"labels line {number}: a label the model does not know; its labels: {', '.join(known)}"
            )
        wanted = len(src) if per_token else 1
        if src and len(ref) != wanted:
            unit = f"{len(src)} source tokens" if per_token else "one line"
            raise ValueError(f"labels line {number}: {len(ref)} labels for {unit}; give {wanted}")


def evaluate_parser(loaded: Loaded, golds: list[Tree], options: DecodeConfig) -> BracketScore:
    """Labelled bracket scores (EVALB conventions) of a parsing model (or ensemble) on gold
    trees' sentences."""
    reader, engine = decoding_engine(loaded)
    if not data_kind(reader.meta.data_kind).trees:
        raise ValueError(
            f"{reader.path} is not a parsing model (it was not trained on `prepare --task parse`)"
        )
    encoded = encode_lines(reader, [" ".join(g.words()) for g in golds])
    hyps = engine.decode(Request(encoded.sources, options))
    outputs = [h[0].tokens if h else [] for h in hyps]
    score, _ = score_outputs(reader.tgt_vocab, outputs, golds, reader.meta.parse_root or "S")
    return score
