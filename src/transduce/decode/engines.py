"""The engines by name: one table through which the command line, the server and
`transduce.load` open a model for decoding, and which says what each engine can do before a
model is opened (so that an option it cannot honour is refused before anything is loaded)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..store.checkpoint import EXPORT_INFO
from ..store.load import LoadedModel, load_for_decoding
from .options import PREFIX_WITH_SHORTLIST
from .shortlist import Shortlist
from .torch_engine import TorchEngine

Opener = Callable[[Path, str, "int | None", str, "Shortlist | None"], LoadedModel]


def open_torch(
    path: Path,
    quantize: str = "none",
    threads: int | None = None,
    device: str = "auto",
    shortlist: object = None,
) -> LoadedModel:
    """`load_for_decoding`, decoded by our engine (which takes a shortlist per call). A CTranslate2
    export holds no weights of ours: it is refused, saying which engine decodes it."""
    if (Path(path) / EXPORT_INFO).is_file():
        raise ValueError(
            f"{path} is a CTranslate2 export (`transduce export`); decode it with --engine ctranslate2"
        )
    loaded = load_for_decoding(path, quantize, threads, device)
    return dataclasses.replace(loaded, engine=TorchEngine(loaded.model))


def open_ctranslate2(
    path: Path,
    quantize: str = "none",
    threads: int | None = None,
    device: str = "auto",
    shortlist: Shortlist | None = None,
) -> LoadedModel:
    """`ctranslate2_engine.open_ctranslate2`, imported when a model is opened with it: the torch
    engine's commands do not load the CTranslate2 engine and interop modules (about 30 ms a start)."""
    from .ctranslate2_engine import open_ctranslate2 as open_export

    return open_export(path, quantize, threads, device, shortlist)


@dataclass(frozen=True)
class EngineKind:
    """What an engine is called, how it opens a checkpoint, and what it can do."""

    name: str
    open: Opener  # (path, quantize, threads, device, shortlist) -> the model opened for it
    ensembles: bool  # several checkpoints decode as their ensemble
    attention: bool  # attention weights can be read (plots, the server's /attention)
    # options it does not honour, by the option's name, and why
    refuses: dict[str, str] = field(default_factory=dict)


ENGINES: dict[str, EngineKind] = {
    "torch": EngineKind("torch", open_torch, ensembles=True, attention=True),
    "ctranslate2": EngineKind(
        "ctranslate2",
        open_ctranslate2,
        ensembles=False,
        attention=False,
        refuses={
            "src_trees": "CTranslate2 models read no source trees (syntax-aware models decode with the torch "
            "engine)",
            "static_cache": "it is the torch engine's; CTranslate2 keeps its own caches",
            "prefix_with_shortlist": PREFIX_WITH_SHORTLIST,
        },
    ),
}


def engine_kind(name: str) -> EngineKind:
    """The table's row for an engine's name (ValueError naming the engines there are)."""
    if name not in ENGINES:
        raise ValueError(f"engine {name!r}: allowed: {', '.join(ENGINES)}")
    return ENGINES[name]


def refused(name: str, **given: object) -> tuple[str, str] | None:
    """The first of the `given` options that is set and that engine `name` cannot honour, and why;
    None when it honours them all."""
    kind = engine_kind(name)
    return next(
        (
            (option, kind.refuses[option])
            for option, value in given.items()
            if value and option in kind.refuses
        ),
        None,
    )


def open_models(
    paths: Sequence[Path],
    engine: str = "torch",
    *,
    quantize: str = "none",
    threads: int | None = None,
    device: str = "auto",
    shortlist: Shortlist | None = None,
) -> list[LoadedModel]:
    """Each checkpoint opened for decoding with `engine` (several: an ensemble's members, where
    the engine decodes ensembles); ValueError naming what cannot be done."""
    kind = engine_kind(engine)
    if not paths:
        raise ValueError("give at least one checkpoint")
    if len(paths) > 1 and not kind.ensembles:
        raise ValueError(
            f"--engine {engine} decodes one model; an ensemble of several decodes with --engine torch"
        )
    return [kind.open(Path(p), quantize, threads, device, shortlist) for p in paths]
