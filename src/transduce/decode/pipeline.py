"""Input lines -> rendered outputs: the one decoding path of `translate`, `evaluate` and `serve`.

Three steps, each usable alone (the server schedules the middle one itself):
`encode_lines` reads lines in the model's input format and truncates over-long ones, the loaded
model's engine (`decode/engine.py`) searches or samples one `Request`, and `render` turns output
ids into text (bracketed trees for parsers); the search and sampling settings come from
`options.decode_options`. `output_rows` lays the outputs out as `translate` writes them (best
only, or n-best rows). Wherever one loaded model goes, a list of them may go instead:
`decoding_model` checks that they read and write the same vocabularies and decodes with their
ensemble (`decoding_engine`). `score_lines` is the same path for forced decoding of given
targets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ..config import DecodeConfig
from ..data.kinds import data_kind
from ..data.source import SourceAnnotation
from ..data.vocab import Vocab
from ..parsing import output_trees
from ..store.load import LoadedModel
from .engine import Engine, Request
from .engines import engine_kind
from .ensemble import Ensemble
from .inputs import encode_inputs
from .kinds import decoding_for
from .languages import language_input, with_tags
from .scoring import Score
from .search import Hypothesis
from .shortlist import Shortlist
from .targets import encode_targets
from .torch_engine import TorchEngine

Loaded = LoadedModel | Sequence[LoadedModel]  # one model, or the members of an ensemble


def _vocab_difference(a: Vocab, b: Vocab) -> str | None:
    if len(a) != len(b):
        return f"{len(a)} and {len(b)} entries"
    for i in range(len(a)):
        if a.token(i) != b.token(i):
            return f"entry {i} is {a.token(i)!r} and {b.token(i)!r}"
    return None


def decoding_model(loaded: Loaded) -> tuple[LoadedModel, nn.Module]:
    """The checkpoint that reads the input and renders the output, and the model to decode with:
    its own model, or for several checkpoints their Ensemble. Members must read the same input
    format with the same source vocabulary and write the same target vocabulary (ValueError
    naming both checkpoints and the difference)."""
    if isinstance(loaded, LoadedModel):
        return loaded, loaded.model
    members = list(loaded)
    if not members:
        raise ValueError("no model to decode with")
    first = members[0]
    for other in members[1:]:
        if len(first.factor_vocabs) != len(other.factor_vocabs):
            raise ValueError(f"ensemble of {first.path} and {other.path}: they read different input formats")
        factors = zip(first.factor_vocabs, other.factor_vocabs, strict=True)
        for side, a, b in (
            ("target", first.tgt_vocab, other.tgt_vocab),
            ("source", first.src_vocab, other.src_vocab),
            *((f"factor {k}", x, y) for k, (x, y) in enumerate(factors, 1)),
        ):
            difference = _vocab_difference(a, b)
            if difference is not None:
                raise ValueError(
                    f"ensemble of {first.path} and {other.path}: "
                    f"their {side} vocabularies differ ({difference})"
                )
        if (first.meta.source, first.meta.data_kind) != (other.meta.source, other.meta.data_kind):
            raise ValueError(f"ensemble of {first.path} and {other.path}: they read different input formats")
        kinds = [(m.config.model.kind, m.config.model.classifier) for m in (first, other)]
        if kinds[0] != kinds[1]:
            raise ValueError(f"ensemble of {first.path} and {other.path}: they are different kinds of model")
    if len(members) == 1:
        return first, first.model
    return first, Ensemble([m.model for m in members])


def decoding_engine(loaded: Loaded, shortlist: Shortlist | None = None) -> tuple[LoadedModel, Engine]:
    """The checkpoint that reads the input and renders the output, and the engine that decodes:
    the checkpoint's own (ours for a model loaded for its weights alone), or for several
    checkpoints ours on their Ensemble, where every member's engine decodes ensembles (ValueError
    naming the other engine)."""
    members = [loaded] if isinstance(loaded, LoadedModel) else list(loaded)
    for member in members if len(members) > 1 else []:
        if member.engine is not None and not engine_kind(member.engine.name).ensembles:
            raise ValueError(
                f"an ensemble decodes with the torch engine only; {member.path} is opened for "
                f"{member.engine.name}"
            )
    reader, model = decoding_model(loaded)
    engine = reader.engine if len(members) == 1 and reader.engine is not None else TorchEngine(model)
    return reader, engine.shortlisted(shortlist)


def encode_prefixes(
    loaded: LoadedModel, prefixes: Sequence[str], lines: int, first: int = 0
) -> list[list[int]]:
    """Per input line, the target-side text every output must start with, as target ids. Each is
    encoded on its own, so it should end at a word boundary; a word the vocabulary cannot spell is
    an UnknownWordError (lines numbered from `first` + 1). A classifier takes no prefixes."""
    decoding = decoding_for(loaded.config.model.kind)
    if not decoding.prefixes:
        raise ValueError(decoding.refusal("forced prefixes", "do"))
    if len(prefixes) != lines:
        raise ValueError(f"{len(prefixes)} forced prefixes for {lines} input lines")
    return encode_targets(loaded.tgt_vocab, prefixes, first + 1)


@dataclass
class Encoded:
    """Input lines in the model's input format."""

    sources: list[list[int]]  # empty for empty lines
    annotations: list[SourceAnnotation] | None  # factored or syntax-aware models
    truncated: int  # how many lines were cut to max_src_len
    target_first: int | None = None  # the token every output starts with (M2M100's target language)

    def forced(self, prefixes: list[list[int]] | None) -> list[list[int]] | None:
        """Each line's forced prefix: the target language's token (if any) before its own."""
        if self.target_first is None:
            return prefixes
        return [[self.target_first, *p] for p in prefixes or [[] for _ in self.sources]]


def encode_lines(
    loaded: LoadedModel,
    lines: list[str],
    trees: Path | None = None,
    max_src_len: int | None = None,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
) -> Encoded:
    """Encode lines (ValueError naming a bad line) and cut sources longer than `max_src_len`. A
    multilingual model's sources start with a language's token: our tags' model with the target
    language's (the line's own tag, else `tgt_lang`'s), M2M100's with `src_lang`'s, its outputs
    then forced to start with `tgt_lang`'s (decode/languages.py)."""
    if max_src_len is not None and max_src_len < 1:
        raise ValueError(f"--max-src-len must be >= 1, not {max_src_len}")
    languages = language_input(loaded, lines, tgt_lang, src_lang)
    sources, annotations = encode_inputs(loaded, languages.texts, trees)
    sources = with_tags(sources, languages.first)
    long = sum(max_src_len is not None and len(s) > max_src_len for s in sources)
    if long:
        sources = [s[:max_src_len] for s in sources]
        if annotations is not None:
            annotations = [a.truncate(max_src_len) for a in annotations]
    return Encoded(sources, annotations, long, languages.target)


@dataclass
class Output:
    text: str
    score: float


def render(loaded: LoadedModel, lines: list[str], results: list[list[Hypothesis]]) -> list[list[Output]]:
    """Each line's hypotheses as text (best first; samples as drawn); an empty line gives one empty
    output, so n-best output keeps a row for it. Parsers print the repaired tree over the line's
    words."""
    if data_kind(loaded.meta.data_kind).trees:
        root = loaded.meta.parse_root or "S"

        def text(number: int, ids: list[int]) -> str:
            return str(output_trees(loaded.tgt_vocab, [ids], [lines[number].split()], root)[0])
    else:

        def text(number: int, ids: list[int]) -> str:
            return loaded.tgt_vocab.decode(ids)

    return [
        [Output(text(n, h.tokens), h.score) for h in hyps] or [Output("", 0.0)]
        for n, hyps in enumerate(results)
    ]


def output_rows(outputs: list[list[Output]], nbest: bool = False, first: int = 0) -> list[str]:
    """The text `translate` writes, one row per line: the best output, or with `nbest` every
    output as 'line ||| text ||| score' (lines numbered from `first`, by default 0)."""
    if nbest:
        return [
            f"{n} ||| {o.text} ||| {o.score:.4f}" for n, found in enumerate(outputs, first) for o in found
        ]
    return [found[0].text for found in outputs]


def translate_lines(
    loaded: Loaded,
    lines: list[str],
    options: DecodeConfig,
    *,
    trees: Path | None = None,
    max_src_len: int | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    prefixes: Sequence[str] | None = None,
    first: int = 0,
    shortlist: Shortlist | None = None,
    scores: bool = True,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
) -> tuple[list[list[Output]], Encoded]:
    """Encode, decode and render `lines`: per line its n-best outputs (or its samples when
    `options.search` is "sample"); also what was encoded. `loaded`: one model or an ensemble's
    members. prefixes: per line, target text each output starts with (search continues after it).
    first: the number of lines[0] in a longer input read in parts (sampling seeds follow it).
    shortlist: score only the target tokens it lists for each batch's sources.
    scores=False: the outputs' scores are not read (they may be NaN: see Engine.decode).
    tgt_lang: a multilingual model's target language, for the lines that name none; src_lang: the
    source language, for a model that reads it from a token (M2M100, NLLB)."""
    reader, engine = decoding_engine(loaded, shortlist)
    encoded = encode_lines(reader, lines, trees, max_src_len, tgt_lang, src_lang)
    forced = encode_prefixes(reader, prefixes, len(lines), first) if prefixes is not None else None
    request = Request(
        encoded.sources,
        options,
        prefixes=encoded.forced(forced),
        numbers=range(first, first + len(lines)),
        annotations=encoded.annotations,
        on_batch=on_batch,
        scores=scores,
    )
    return render(reader, lines, engine.decode(request)), encoded


def score_lines(
    loaded: Loaded,
    sources: list[str],
    targets: list[str],
    *,
    trees: Path | None = None,
    max_src_len: int | None = None,
    max_tokens: int = 4096,
    per_token: bool = False,
    on_batch: Callable[[int, int], None] | None = None,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
) -> list[Score]:
    """log P(target | source) of each pair of lines (forced decoding), in input order.

    Targets are encoded with the target vocabulary as they are (a parser's target is its
    linearised tree); a word it cannot spell is an UnknownWordError. An empty source is read as
    EOS alone, except by models whose input carries tags or trees, which refuse it."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source lines and {len(targets)} target lines")
    reader, engine = decoding_engine(loaded)
    encoded = encode_lines(reader, sources, trees, max_src_len, tgt_lang, src_lang)
    if encoded.annotations is not None:
        for number, ids in enumerate(encoded.sources, 1):
            if not ids:
                raise ValueError(
                    f"source line {number} is empty; this model reads its words with tags or trees"
                )
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, not {max_tokens}")
    request = Request(
        encoded.sources,
        reader.config.decode.model_copy(update={"max_tokens": max_tokens}),
        annotations=encoded.annotations,
        on_batch=on_batch,
        targets=encoded.forced(encode_targets(reader.tgt_vocab, targets)),
        per_token=per_token,
    )
    return engine.score(request)
