"""Input lines -> rendered outputs: the one decoding path of `translate`, `evaluate` and `serve`.

Three steps, each usable alone (the server schedules the middle one itself):
`encode_lines` reads lines in the model's input format and truncates over-long ones,
`decode_all` searches, and `render` turns output ids into text (bracketed trees for parsers).
`decode_options` overlays the caller's search settings on the checkpoint's, validated once.
`output_rows` lays the outputs out as `translate` writes them (best only, or n-best rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config import ConfigError, DecodeConfig
from ..data.source import SourceAnnotation
from ..parsing import output_trees
from ..store.load import LoadedModel
from .inputs import encode_inputs
from .search import Hypothesis
from .translate import decode_all

# CLI option names of the search settings, for messages.
OPTION = {name: "--" + name.replace("_", "-") for name in DecodeConfig.model_fields}


def decode_options(base: DecodeConfig, **given: Any) -> DecodeConfig:
    """`base` with the given (not None) settings overlaid; one-line ConfigError naming the option."""
    values = base.model_dump()
    values.update({k: v for k, v in given.items() if v is not None})
    try:
        return DecodeConfig.model_validate(values)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            name = OPTION.get(str(e["loc"][0]), str(e["loc"][0])) if e["loc"] else "options"
            problems.append(
                str(e["msg"]).removeprefix("Value error, ")
                if e["type"] == "value_error"
                else f"{name}: {e['msg']}"
            )
        raise ConfigError("; ".join(problems)) from None


@dataclass
class Encoded:
    """Input lines in the model's input format."""

    sources: list[list[int]]  # empty for empty lines
    annotations: list[SourceAnnotation] | None  # factored or syntax-aware models
    truncated: int  # how many lines were cut to max_src_len


def encode_lines(
    loaded: LoadedModel, lines: list[str], trees: Path | None = None, max_src_len: int | None = None
) -> Encoded:
    """Encode lines (ValueError naming a bad line) and cut sources longer than `max_src_len`."""
    if max_src_len is not None and max_src_len < 1:
        raise ValueError(f"--max-src-len must be >= 1, not {max_src_len}")
    sources, annotations = encode_inputs(loaded, lines, trees)
    long = sum(max_src_len is not None and len(s) > max_src_len for s in sources)
    if long:
        sources = [s[:max_src_len] for s in sources]
        if annotations is not None:
            annotations = [a.truncate(max_src_len) for a in annotations]
    return Encoded(sources, annotations, long)


@dataclass
class Output:
    text: str
    score: float


def render(loaded: LoadedModel, lines: list[str], results: list[list[Hypothesis]]) -> list[list[Output]]:
    """Each line's hypotheses as text, best first; an empty line (no hypothesis) gives one empty
    output, so n-best output keeps a row for it. Parsers print the repaired tree over the line's
    words."""
    if loaded.meta.data_kind == "parse":
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


def output_rows(outputs: list[list[Output]], nbest: bool = False) -> list[str]:
    """The text `translate` writes, one row per line: the best output, or with `nbest` every
    output as 'line ||| text ||| score' (lines numbered from 0)."""
    if nbest:
        return [f"{n} ||| {o.text} ||| {o.score:.4f}" for n, found in enumerate(outputs) for o in found]
    return [found[0].text for found in outputs]


def translate_lines(
    loaded: LoadedModel,
    lines: list[str],
    options: DecodeConfig,
    greedy: bool = False,
    trees: Path | None = None,
    max_src_len: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[list[list[Output]], Encoded]:
    """Encode, decode and render `lines`: per line its n-best outputs; also what was encoded."""
    encoded = encode_lines(loaded, lines, trees, max_src_len)
    results = decode_all(
        loaded.model,
        encoded.sources,
        options,
        use_greedy=greedy,
        on_batch=on_batch,
        annotations=encoded.annotations,
    )
    return render(loaded, lines, results), encoded
