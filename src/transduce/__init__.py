"""transduce: Transformer and Universal Transformer sequence transduction.

The Python API, for a notebook or a script: the same paths as the command line, as functions.

    import transduce

    cfg = transduce.load_config("small", ["data.task=reverse", "train.steps=2000"])
    transduce.fit(cfg, "runs/reverse")                       # as `transduce train`
    model = transduce.load("runs/reverse")                   # its best checkpoint
    transduce.translate(model, ["1 2 3", "4 5"], beam=4)     # ['3 2 1', '5 4']
    transduce.score(model, ["1 2 3"], ["3 2 1"])[0].log_prob

Each function imports what it needs when called, so `import transduce` stays cheap (no torch).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from .config import Config
    from .decode.pipeline import Loaded, Output
    from .decode.scoring import Score
    from .store.load import LoadedModel

__version__ = "0.1.0"
__all__ = ["fit", "hypotheses", "load", "load_config", "score", "translate"]


def load_config(source: str | Path, overrides: Sequence[str] = ()) -> Config:
    """The config `source` names, with dotted `overrides` such as `"train.steps=2000"` applied.

    `source`: a preset (`small`, `small-fast`, `base`, `big`, `parse`), a TOML/YAML file, or a
    checkpoint or run directory (the config it was trained with). Unknown keys and bad values
    raise `ConfigError`, naming the key and what it allows."""
    from .store.load import config_from

    return config_from(str(_path(source, "source")), _strings(overrides, "overrides"))


def fit(
    config: Config | str | Path,
    run_dir: str | Path,
    overrides: Sequence[str] = (),
    *,
    resume: bool = True,
    init_from: str | Path | None = None,
    keep_optimizer: bool = False,
    keep_step: bool = False,
    progress: bool = True,
) -> dict[str, float]:
    """Train into `run_dir` as `transduce train` does; returns the last validation's metrics.
    (Not named `train`: that is the package `transduce.train`, which importing it would put here.)

    `config`: a `Config` or what `load_config` takes, with `overrides` applied. The run directory
    gets checkpoints, `best.json`, `train.log` and TensorBoard files; an interrupted run continues
    from its newest checkpoint when trained again (`resume`). `init_from` starts a new run from
    trained weights (fine-tuning; `keep_optimizer` and `keep_step` take Adam's state and the step
    count along). The run directory is checked as on the command line (`OutputError` when it lies
    in the dataset or in another command's output, or holds checkpoints and `resume` is off)."""
    from pathlib import Path

    from .config import Config, build_config
    from .train.run_dir import run_directory
    from .train.trainer import Trainer

    for name, flag in (("resume", resume), ("keep_optimizer", keep_optimizer), ("keep_step", keep_step)):
        _flag(flag, name)
    _flag(progress, "progress")
    run_dir = _path(run_dir, "run_dir")
    overrides = _strings(overrides, "overrides")
    if (keep_optimizer or keep_step) and init_from is None:
        raise ValueError("keep_optimizer and keep_step go with init_from")
    if isinstance(config, Config):
        cfg = build_config(config.model_dump(), overrides) if overrides else config
    else:
        cfg = load_config(_path(config, "config", "a Config, a preset's name or a config file"), overrides)
    start = _path(init_from, "init_from") if init_from is not None else None
    run = run_directory(str(run_dir), Path(run_dir), resume, cfg.data.dataset, start)
    trainer = Trainer(cfg, run, show_progress=progress)

    def init() -> None:
        assert start is not None
        trainer.init_from(start, keep_optimizer, keep_step)

    return trainer.fit(resume=resume, init=init if start is not None else None)


def load(
    path: str | Path,
    *,
    device: str = "auto",
    quantize: str = "none",
    threads: int | None = None,
    engine: str = "torch",
) -> LoadedModel:
    """A checkpoint, or a run directory's best checkpoint, ready to decode (as `transduce translate`
    loads it): on `device` (`auto`: the first CUDA device when there is one, else the CPU), on the
    CPU with its weights packed for oneDNN or, with `quantize="int8"`, quantised; `threads` sets
    PyTorch's CPU threads. A list of loaded models decodes as their ensemble.

    `engine="ctranslate2"` decodes with CTranslate2 instead (`pip install ctranslate2`): the
    checkpoint is exported on first use into a cache beside its weights (`path` may also be an
    export directory), `threads` are CTranslate2's and `quantize="int8"` its int8 weights.
    Ensembles, syntax-aware and factored models, Universal Transformers and the other model
    kinds decode with `engine="torch"` only."""
    from .decode.engines import engine_kind

    for name, value in (("device", device), ("quantize", quantize), ("engine", engine)):
        if not isinstance(value, str):
            raise TypeError(f"{name}: a string, not {type(value).__name__} ({value!r})")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise TypeError(
            f"threads: a whole number of CPU threads or None, not {type(threads).__name__} ({threads!r})"
        )
    return engine_kind(engine).open(_path(path, "path"), quantize, threads, device, None)


def translate(
    model: Loaded,
    lines: Sequence[str],
    *,
    greedy: bool = False,
    prefixes: Sequence[str] | None = None,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
    **options: Any,
) -> list[str]:
    """Each line's output: its translation (a parser's tree, a classifier's labels, a language
    model's continuation of it), in input order; an empty line gives an empty output.

    `options` overlay the checkpoint's decoding settings (the `decode.` keys: `search` ("beam",
    "greedy" or "sample"), `beam`, `alpha`, `max_len_a`, `max_len_b`, `min_len`, `max_tokens`,
    `temperature`, `top_k`, `top_p`, `seed`); `greedy=True` and `sample=True` are spellings of
    `search`; `prefixes` gives each line the text its output starts with; `tgt_lang` a multilingual
    model's target language (for lines that do not start with one of its tags), with `src_lang`
    for a model that reads the source language from a token (M2M100, NLLB). For several outputs
    per line (`nbest`, `num_samples`) use `hypotheses`."""
    languages = {"tgt_lang": tgt_lang, "src_lang": src_lang}
    found = hypotheses(model, lines, greedy=greedy, prefixes=prefixes, **languages, **options)
    return [outputs[0].text for outputs in found]


def hypotheses(
    model: Loaded,
    lines: Sequence[str],
    *,
    greedy: bool = False,
    prefixes: Sequence[str] | None = None,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
    **options: Any,
) -> list[list[Output]]:
    """Each line's outputs with their scores (`.text`, `.score`): the `nbest` best, or with
    `sample=True` its `num_samples` samples; the options are `translate`'s."""
    from .decode.options import decode_options
    from .decode.pipeline import decoding_model, translate_lines

    reader, _ = decoding_model(_model(model))
    lines = _lines(lines, "lines")
    prefixes = _lines(prefixes, "prefixes") if prefixes is not None else None
    known = [*type(reader.config.decode).model_fields, "sample"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"unknown decoding option {', '.join(unknown)}; allowed: {', '.join(known)}")
    _flag(greedy, "greedy")
    if options.get("sample") is not None:
        _flag(options["sample"], "sample")
    _language(tgt_lang, "tgt_lang")
    _language(src_lang, "src_lang")
    settings = decode_options(reader.config.decode, greedy=greedy or None, **options)
    with _named_as_arguments():
        outputs, _ = translate_lines(
            model, lines, settings, prefixes=prefixes, tgt_lang=tgt_lang, src_lang=src_lang
        )
    return outputs


def score(
    model: Loaded,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    per_token: bool = False,
    tgt_lang: str | None = None,
    src_lang: str | None = None,
) -> list[Score]:
    """log P(target | source) of each pair (forced decoding), as `transduce score` prints it:
    `.log_prob` (EOS included), `.mean` per token, and with `per_token` each token's `.tokens`;
    `tgt_lang` as `translate`'s."""
    from .decode.pipeline import score_lines

    _flag(per_token, "per_token")
    _language(tgt_lang, "tgt_lang")
    _language(src_lang, "src_lang")
    with _named_as_arguments():
        return score_lines(
            _model(model),
            _lines(sources, "sources"),
            _lines(targets, "targets"),
            per_token=per_token,
            tgt_lang=tgt_lang,
            src_lang=src_lang,
        )


def _lines(value: object, name: str) -> list[str]:
    """`value` as a list of lines, or a TypeError naming the argument: a str (or bytes) where a
    list of them belongs would be read one character per line."""
    if isinstance(value, str | bytes):
        raise TypeError(
            f"{name}: a list of strings, one per line, not a single {type(value).__name__} ([{value!r}])"
        )
    try:
        lines = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"{name}: a list of strings, one per line, not {type(value).__name__}") from None
    wrong = next((i for i, line in enumerate(lines) if not isinstance(line, str)), None)
    if wrong is not None:
        raise TypeError(f"{name}[{wrong}]: a string, not {type(lines[wrong]).__name__}")
    return lines


def _strings(value: object, name: str) -> list[str]:
    """`value` as a list of strings (dotted overrides), or a TypeError naming the argument."""
    if isinstance(value, str | bytes):
        raise TypeError(
            f"{name}: a list of strings such as ['train.steps=2000'], not a single {type(value).__name__}"
        )
    if value is None:
        raise TypeError(f"{name}: a list of strings such as ['train.steps=2000'], not None")
    return _lines(value, name)


def _path(value: object, name: str, what: str = "a path") -> Path:
    """`value` as a Path, or a TypeError naming the argument: a str or an os.PathLike of a str."""
    from pathlib import Path

    if isinstance(value, str) or (hasattr(value, "__fspath__") and isinstance(value.__fspath__(), str)):
        return Path(value)  # type: ignore[arg-type]
    raise TypeError(f"{name}: {what} (a str or pathlib.Path), not {type(value).__name__}")


def _flag(value: object, name: str) -> None:
    """A TypeError naming the argument unless `value` is True or False (a string such as "no"
    would count as true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: True or False, not {type(value).__name__} ({value!r})")


def _language(value: object, name: str) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name}: a language code (str) or None, not {type(value).__name__} ({value!r})")


@contextmanager
def _named_as_arguments() -> Iterator[None]:
    """A wrong or missing language's error (a ValueError) naming `tgt_lang` and `src_lang`, the
    arguments given, where the command line's message names its options (`--tgt-lang`)."""
    from .decode.languages import TargetLanguageError

    try:
        yield
    except TargetLanguageError as exc:
        raise TargetLanguageError(exc.by_field()) from None


def _model(model: object) -> Loaded:
    """`model` when it is a loaded model or a list of them (an ensemble); a TypeError otherwise,
    saying how to load one (a path is the usual mistake)."""
    from .store.load import LoadedModel

    members = model if isinstance(model, list | tuple) else [model]
    if not members or not all(isinstance(m, LoadedModel) for m in members):
        hint = (
            f"transduce.load({str(model)!r})"
            if isinstance(model, str) or hasattr(model, "__fspath__")
            else "transduce.load(path)"
        )
        raise TypeError(f"model: a loaded model ({hint}) or a list of them, not {type(model).__name__}")
    return model  # type: ignore[return-value]
