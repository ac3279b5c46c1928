"""Decoding options as a caller gives them: overlaid on a checkpoint's, validated once, and refused
where the chosen decoding would silently ignore them.

Messages name options through templates (`{beam}`), so that each caller names them its own way:
the library by field (`beam`), the command line by option (`--beam`), the server by JSON field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from torch import nn

from ..config import ConfigError, DecodeConfig
from .kinds import decoding_of
from .search import max_output_length
from .static import static_unsupported

SEARCH_ONLY = ("beam", "alpha")  # beam search's settings; sampling ignores them (nbest: see below)
SAMPLING_ONLY = ("temperature", "top_k", "top_p", "seed", "num_samples")  # search ignores them

Naming = Callable[[str], str]  # a field's name as the caller shows it

PREFIX_WITH_SHORTLIST = (
    "forced prefixes with a shortlist need the torch engine: CTranslate2 misreads a prefix's tokens "
    "that its vocabulary map does not list"
)


class _Names(dict[str, str]):
    def __init__(self, name: Naming) -> None:
        super().__init__()
        self.name = name

    def __missing__(self, field: str) -> str:
        return self.name(field)


def _literal(text: str) -> str:
    """`text` as a template that renders to itself."""
    return text.replace("{", "{{").replace("}", "}}")


class OptionsError(ConfigError):
    """Decoding options that cannot be used. `problems` holds one (field at fault, or None when
    several are, message template) pair per problem; `describe` renders them on one line."""

    def __init__(self, problems: list[tuple[str | None, str]]) -> None:
        self.problems = problems
        super().__init__(self.describe())

    def messages(self, name: Naming = str) -> list[tuple[str | None, str]]:
        """Per problem, its field and its message with options named by `name`."""
        return [(field, template.format_map(_Names(name))) for field, template in self.problems]

    def describe(self, name: Naming = str) -> str:
        return "; ".join(message for _, message in self.messages(name))


def _problem(error: Any) -> tuple[str | None, str]:
    key = str(error["loc"][0]) if error["loc"] else None
    message = str(error["msg"]).removeprefix("Value error, ")
    if key is None:  # a model validator's message, its names already templates (see decode_options)
        return None, message
    field = DecodeConfig.model_fields.get(key)
    allowed = f" ({field.description})" if field is not None and field.description else ""
    return key, "{" + key + "}: " + _literal(message + allowed)


def ignored(options: DecodeConfig, given: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Problems for the `given` options that `options`' way of decoding would not use: search
    settings with sampling or greedy search, sampling settings without sampling. `nbest` 1 is
    allowed with either (one output per input is what they give by default)."""
    if options.search == "beam":
        return [
            (name, f"{{{name}}} applies only to sampling; give {{sample}} too, or leave it out")
            for name in SAMPLING_ONLY
            if name in given
        ]
    mode = "{sample}" if options.sample else "{greedy}"
    problems = [
        (
            name,
            f"{{{name}}} applies to beam search, not to {SEARCH_NAMES[options.search]} ({mode}); "
            "leave it out",
        )
        for name in SEARCH_ONLY
        if name in given
    ]
    if given.get("nbest", 1) != 1:
        several = (
            "samples per input give {num_samples}" if options.sample else "outputs per input use beam search"
        )
        problems.append(("nbest", f"{{nbest}} applies to beam search; for several {several}"))
    if options.greedy:
        problems += [
            (name, f"{{{name}}} applies only to sampling, not to greedy search ({{greedy}}); leave it out")
            for name in SAMPLING_ONLY
            if name in given
        ]
    return problems


SEARCH_NAMES = {"beam": "beam search", "greedy": "greedy search", "sample": "sampling"}


def _search(given: dict[str, Any]) -> dict[str, Any]:
    """`given` with `greedy` and `sample` (flags, as the command line and the server take them)
    read as `search`; an OptionsError when they ask for two ways of decoding."""
    given = dict(given)
    chosen = [name for name in ("greedy", "sample") if given.pop(name, None)]
    if "search" in given:
        chosen += [] if given["search"] in chosen else [given["search"]]
    if len(set(chosen)) > 1:
        names = " and ".join(
            "{" + name + "}" if name in ("greedy", "sample") else f"search {name}" for name in chosen
        )
        raise OptionsError([(None, f"{names} exclude each other; choose one")])
    if chosen:
        given["search"] = chosen[0]
    return given


def _asks_for_beam(given: dict[str, Any]) -> bool:
    """Whether the given options are beam search's own (`beam`, `alpha`, `nbest` above 1): with
    no search named, they ask for it whatever the checkpoint's default (`decode.search`)."""
    return any(name in given for name in SEARCH_ONLY) or given.get("nbest", 1) != 1


def decode_options(base: DecodeConfig, **given: Any) -> DecodeConfig:
    """`base` with the given (not None) settings overlaid, validated once: an OptionsError names
    every problem, including a given option that the decoding chosen would ignore. `greedy=True`
    and `sample=True` are spellings of `search`; with none of them, beam search's own options ask
    for beam search (a checkpoint trained with `decode.search = "greedy"` given `--beam 4`)."""
    given = _search({k: v for k, v in given.items() if v is not None})
    if "search" not in given and base.search != "beam" and _asks_for_beam(given):
        given["search"] = "beam"  # a checkpoint that decodes greedily or by sampling, asked for a beam
    try:
        options = DecodeConfig.model_validate(  # strict: a "4" or a True is no beam size
            {**base.model_dump(), **given}, strict=True, context={"name": lambda field: "{" + field + "}"}
        )
    except ValidationError as exc:
        raise OptionsError([_problem(e) for e in exc.errors()]) from None
    problems = ignored(options, given)
    if problems:
        raise OptionsError(problems)
    return options


def check_min_len(sources: Sequence[Sequence[int]], options: DecodeConfig) -> None:
    """OptionsError when `min_len` is above a non-empty source's output length limit (a * |x| + b):
    EOS would never be allowed there, and its outputs would be cut at the limit without one."""
    if options.min_len == 0:
        return
    a, b = options.max_len_a, options.max_len_b
    for number, source in enumerate(sources, 1):
        limit = max_output_length(len(source), a, b)
        if source and options.min_len > limit:
            raise OptionsError(
                [
                    (
                        "min_len",
                        f"{{min_len}} ({options.min_len}) is above input {number}'s output length limit "
                        f"({limit} = {a:g} x {len(source)} source tokens + {b}): its outputs could not end; "
                        "lower {min_len}, or raise {max_len_a} or {max_len_b}",
                    )
                ]
            )


def check_for_model(model: nn.Module, options: DecodeConfig, prefixed: bool = False) -> None:
    """OptionsError for settings this model cannot decode with, so that they are refused before
    any work is queued or done. `model`: a model of any kind, or an Ensemble; `prefixed`: forced
    prefixes are given."""
    decoding = decoding_of(model)
    refused = []
    if options.sample and not decoding.samples:
        refused.append(("sample", decoding.refusal("sampling")))
    if prefixed and not decoding.prefixes:
        refused.append(("prefixes", decoding.refusal("forced prefixes", "do")))
    if options.static_cache and (why := static_unsupported(model)) is not None:
        refused.append(("static_cache", f"{{static_cache}} needs a plain Transformer: {_literal(why)}"))
    if refused:
        raise OptionsError(refused)
