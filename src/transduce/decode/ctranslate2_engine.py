"""`--engine ctranslate2`: decoding and scoring with CTranslate2 behind our commands and server.

A checkpoint is exported on first use into a cache beside its weights,
`<checkpoint>/ctranslate2-<quantization>-<first 12 hex of the weights' sha256>/`, written
atomically and reused while it is current: its transduce.json must name the same weights,
vocabularies, config and quantisation, so a changed checkpoint is never decoded from a stale
export. An export directory (`transduce export --format ctranslate2`) may be given instead; it
carries the checkpoint's vocabularies and metadata. Lines are read and rendered by our code as
on the torch engine; CTranslate2 gets our tokens followed by `</s>`.

How our settings map onto `translate_batch`, and where they cannot be the same:
- batches: the torch engine's (length-sorted under `max_tokens` padded source tokens), so a
  shortlist (CTranslate2's vocabulary map, `use_vmap`) restricts a batch to the same tokens as
  ours where the batch is one call (see below).
- length limit: ours is a * |x| + b per sentence, CTranslate2's `max_decoding_length` one per
  call. Under a lower limit the hypotheses cut at it are finished candidates that can beat an
  output ending later, so a beam search's output found under a longer limit is not what the
  sentence's own limit gives, even when it fits, unless that search was over before reaching
  the lower limit. With a length penalty (alpha > 0) CTranslate2 stops a search once it holds
  `beam` finished hypotheses: a batch's sources without a prefix are searched in one call under
  its longest limit with all `beam` returned, and a source whose every hypothesis ended before
  its own limit keeps its outputs; the others, and every beam search at alpha 0 (which stops
  at the n best, not all returned), make one call per distinct limit. Greedy search and
  sampling make one call per batch with its longest limit (a greedy output within a sentence's
  limit is the same under it); an output longer than its sentence's limit is cut to it and
  rescored (`score_batch`): a greedy output's first tokens are what its own limit gives, a cut
  sample is distributed as one drawn under the limit. Under a shortlist (whose probabilities
  `score_batch` does not restrict) a greedy output is searched again. (A `callback` stopping
  each row at its own limit would spare the rescoring, but calling Python at every token cost
  15% of a greedy call on short lines.)
- scores: ours, log P (prefix and EOS included) / ((5 + |Y|) / 6)^alpha for beam search, log P for
  greedy search and samples, computed from CTranslate2's score (log P after the prefix /
  |Y|^alpha, |Y| counting EOS) and, with a prefix, the prefix's log-probability (`score_batch`).
  Asked for only where the caller reads them (n-best rows, the server, the Python API): for
  `translate`'s one-best text and `evaluate` they are left out (NaN), which spares
  `return_scores` (about 5% of a greedy call) and the rescoring of cut outputs.
- beam search: CTranslate2 ranks by log P / |Y|^alpha (alpha 0: the same as ours) and, at alpha 0,
  stops once its best hypothesis is finished and it holds n, where ours goes on while a live
  beam could still enter the n best: the best is the same, a lower n-best entry may differ.
  Its beam search never ends an output at the first step after a forced prefix, nor, in a call
  with prefixes, a source's output without one at its first step. Sources with and without a
  prefix are searched in calls apart, and the output that ends right after a prefix, where ours
  would hold it (its EOS among the k most probable tokens there), is computed from the logits
  of one greedy step and ranked with CTranslate2's outputs; not under a shortlist, whose
  logits cover its tokens only.
- shortlist: CTranslate2's vocabulary map lists the tokens of a call's sources; where a batch's
  sources are split across calls (beam search's limits and prefixes, a greedy retry), each
  call's tokens are those of its own sources, a subset of what our batch scores.
- sampling: the same distribution, not the same draws; CTranslate2 seeds one generator per
  translator, so `seed` makes a whole input's samples repeat (the generator is started afresh
  with it), not each line's alone.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..choices import MAX_THREADS, QUANTIZE
from ..config import DecodeConfig
from ..data.batching import make_batches
from ..data.meta import validate
from ..data.vocab import EOS, PAD
from ..fileio import OutputError, WriteError, atomic_directory
from ..interop.ctranslate2 import (
    EXPORT_INFO,
    ExportError,
    check_quantization,
    unsupported,
    write_export,
)
from ..store.checkpoint import CheckpointError, file_sha256, vocab_digest
from ..store.load import LoadedModel, load_model, load_reader, reader_from
from ..store.meta import CheckpointMeta
from .engine import Request
from .options import PREFIX_WITH_SHORTLIST, OptionsError, check_for_model, check_min_len
from .scoring import Score, check_target
from .search import Hypothesis, length_penalty, max_output_length
from .shortlist import Shortlist
from .torch_engine import checked_prefixes

CACHE_PREFIX = "ctranslate2"
WEIGHTS = {"none": "float32", "int8": "int8"}  # --quantize -> the cached export's weights


class EngineError(ValueError):
    """A model or export the CTranslate2 engine cannot open, or a device it cannot use; says why."""


def open_ctranslate2(
    path: Path,
    quantize: str = "none",
    threads: int | None = None,
    device: str = "auto",
    shortlist: Shortlist | None = None,
) -> LoadedModel:
    """A checkpoint (or run directory) exported into its cache, or an export directory, opened
    for decoding with CTranslate2 on `device` (`auto`: CUDA when CTranslate2 sees a device),
    `threads` CPU threads (default: CTranslate2's choice), int8 weights with `quantize="int8"`.
    A `shortlist` is loaded as the translator's vocabulary map. EngineError for what it cannot
    open, naming what the model lacks."""
    if quantize not in QUANTIZE:
        raise EngineError(f"--quantize {quantize!r}: allowed: {', '.join(QUANTIZE)}")
    if threads is not None and threads < 1:
        raise EngineError(f"--threads must be a positive integer, not {threads}")
    if threads is not None and threads > MAX_THREADS:
        raise EngineError(f"--threads {threads}: at most {MAX_THREADS}")
    try:
        check_quantization(WEIGHTS[quantize])
    except ExportError:
        raise EngineError("--engine ctranslate2 needs `pip install ctranslate2`") from None
    path = Path(path)
    if (path / EXPORT_INFO).is_file():
        reader, folder = read_export(path), path
    else:
        reader = _reader(path)
        folder = cached_export(reader, WEIGHTS[quantize])
    if shortlist is not None:
        shortlist.check_model(len(reader.src_vocab), len(reader.tgt_vocab), "--shortlist")
    settings = _settings(device, quantize, threads)
    translator = Translator(folder, settings, reader, shortlist)
    return dataclasses.replace(reader, engine=CTranslate2Engine(translator, reader, Names.of(reader)))


def _reader(path: Path) -> LoadedModel:
    """The checkpoint's reader, refused (EngineError naming what it lacks) where CTranslate2 cannot
    hold the model."""
    reader = load_reader(path)
    problems = unsupported(reader)
    if problems:
        raise EngineError(
            f"{reader.path}: CTranslate2 cannot hold {'; '.join(problems)}; decode it with --engine torch"
        )
    return reader


def read_export(folder: Path) -> LoadedModel:
    """The reader of an export directory: the checkpoint metadata and vocabularies it carries,
    once its files are found as they were written (model.bin, and for exports that record them,
    every other file: CTranslate2's config and vocabularies, ours)."""
    record = folder / EXPORT_INFO
    again = "export the checkpoint again with `transduce export --format ctranslate2`"
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
        if not isinstance(info, dict) or not isinstance(info.get("checkpoint"), dict):
            raise ValueError("no checkpoint section")
        meta = validate(info["checkpoint"], CheckpointMeta, record)
    except (OSError, ValueError) as exc:
        why = str(exc).removeprefix(f"{record}: ")
        raise EngineError(f"{record}: not the metadata of a transduce export ({why}); {again}") from None
    model = folder / "model.bin"
    if model.exists() and not model.is_file():
        raise EngineError(f"{model}: not a regular file (a directory, pipe or device); {again}")
    if not model.is_file():
        raise EngineError(f"{folder}: no model.bin; not a CTranslate2 model directory")
    if "model_sha256" not in info:
        raise EngineError(
            f"{record}: no checksum of model.bin, so a damaged model would decode unchecked; {again}"
        )
    others = info.get("files_sha256") or {}  # none in exports written before they were recorded
    if not isinstance(others, dict):
        raise EngineError(
            f"{record}: not the metadata of a transduce export (files_sha256 is no object); {again}"
        )
    for name, digest in {"model.bin": info["model_sha256"], **others}.items():
        file = folder / str(name)
        if file.is_symlink() or not file.is_file() or file.parent != folder:
            raise EngineError(f"{file}: missing, or not a regular file; {again}")
        if file_sha256(file) != digest:
            raise EngineError(
                f"{file}: corrupt or truncated (checksum mismatch), or changed since the export; {again}"
            )
    try:
        return reader_from(folder, meta)
    except CheckpointError as exc:
        raise EngineError(str(exc) if str(exc).startswith(str(folder)) else f"{folder}: {exc}") from None


def current_files(folder: Path, info: dict[str, Any]) -> bool:
    """Whether an export's files are as EXPORT_INFO records them (model.bin, and the others
    where it records them)."""
    others = info.get("files_sha256")
    recorded = {"model.bin": info.get("model_sha256"), **(others if isinstance(others, dict) else {})}
    return all((folder / n).is_file() and file_sha256(folder / n) == d for n, d in recorded.items())


def cache_folder(reader: LoadedModel, weights: str) -> Path:
    """Where the checkpoint's export of these weights is cached: beside them, named by the
    weights' type and checksum."""
    digest = reader.meta.checksums["model.safetensors"]
    return reader.path / f"{CACHE_PREFIX}-{weights}-{digest[:12]}"


def is_current(folder: Path, reader: LoadedModel, weights: str) -> bool:
    """Whether `folder` holds an intact export (its model.bin as written) of exactly this
    checkpoint (weights, vocabularies, config) with these weights' type."""
    try:
        info = json.loads((folder / EXPORT_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(info, dict)
        and isinstance(info.get("files_sha256"), dict)
        and current_files(folder, info)
        and info.get("weights_sha256") == reader.meta.checksums["model.safetensors"]
        and info.get("quantization") == weights
        and info.get("vocab_sha256") == vocab_digest(reader.path)
        and (info.get("checkpoint") or {}).get("config") == reader.meta.config
    )


def cached_export(reader: LoadedModel, weights: str) -> Path:
    """The checkpoint's current export in its cache, written (atomically) when missing or stale."""
    folder = cache_folder(reader, weights)
    if is_current(folder, reader, weights):
        return folder
    loaded = load_model(reader.path)
    try:
        with atomic_directory(folder, "export") as staging:
            write_export(loaded, staging, weights)
    except (OutputError, ExportError) as exc:
        if is_current(folder, reader, weights):  # another process wrote it meanwhile
            return folder
        elsewhere = (
            "export the checkpoint elsewhere (`transduce export --format ctranslate2 -o DIR`) and give DIR"
        )
        if isinstance(exc, WriteError | ExportError):
            raise EngineError(f"{exc}; or {elsewhere}") from None
        raise EngineError(  # a folder there that no export wrote
            f"{folder} holds files that no export wrote (left as they are); move them, or {elsewhere}"
        ) from None
    return folder


def _settings(device: str, quantize: str, threads: int | None) -> dict[str, Any]:
    """ctranslate2.Translator's device, device_index, compute_type and threads for our options."""
    import ctranslate2

    cuda = ctranslate2.get_cuda_device_count()
    name, _, index = device.partition(":")
    if device == "auto":
        name, index = ("cuda" if cuda else "cpu"), ""
    if name not in ("cpu", "cuda") or (index and (name != "cuda" or not index.isdigit())):
        raise EngineError(f"--device {device!r}: allowed: auto, cpu, cuda, cuda:N")
    if name == "cuda" and int(index or 0) >= cuda:
        raise EngineError(f"--device {device}: CTranslate2 sees {cuda} CUDA devices; use --device cpu")
    return {
        "device": name,
        "device_index": int(index or 0),
        "compute_type": "int8" if quantize == "int8" else "default",
        "inter_threads": 1,
        "intra_threads": threads or 0,
    }


class Translator:
    """The ctranslate2.Translator on an export, with a shortlist as its vocabulary map, started
    afresh when sampling asks for a seed (CTranslate2 seeds a translator's generator once)."""

    def __init__(
        self, folder: Path, settings: dict[str, Any], reader: LoadedModel, shortlist: Shortlist | None
    ) -> None:
        self.folder, self.settings, self.shortlist = folder, settings, shortlist
        self.vmap = None
        if shortlist is not None:
            lines = shortlist.vmap(reader.src_vocab, reader.tgt_vocab)
            self.vmap = "".join(f"{line}\n" for line in lines).encode("utf-8")
        self.seed: int | None = None  # the seed the translator was started with, if any
        self.translator = self._start()

    def _start(self) -> Any:
        import ctranslate2

        files = None
        if self.vmap is not None:  # the export's files with the shortlist's map beside them
            files = {
                p.name: p.open("rb") for p in self.folder.iterdir() if p.is_file() and p.name != "vmap.txt"
            }
            files["vmap.txt"] = io.BytesIO(self.vmap)
        try:
            return ctranslate2.Translator(str(self.folder), **self.settings, files=files)
        except (RuntimeError, ValueError) as exc:
            raise EngineError(f"CTranslate2 cannot load {self.folder}: {exc}") from None
        finally:
            for handle in (files or {}).values():
                handle.close()

    def reseed(self, seed: int) -> None:
        """Start the translator afresh with its generator seeded by `seed`."""
        import ctranslate2

        ctranslate2.set_random_seed(seed % 2**32)
        self.translator = self._start()
        self.seed = seed


@dataclass
class Found:
    """One CTranslate2 output as our ids, and its log-probability under the model (prefix and
    EOS included); `steps` counts EOS."""

    tokens: list[int]
    ended: bool  # by EOS, rather than at the length limit
    log_prob: float

    @property
    def steps(self) -> int:
        return len(self.tokens) + self.ended

    def score(self, alpha: float) -> float:
        """What our beam search ranks it by."""
        return self.log_prob / length_penalty(self.steps, alpha)


@dataclass(frozen=True)
class Names:
    """Our ids as the export's token strings and back (CTranslate2 reads and writes strings), made
    once per opened model: an engine is made afresh for every decoding call (`shortlisted`), and
    the tables took 4 ms of a one-line request's 5 at an 8,000-piece vocabulary."""

    src: list[str]
    tgt: list[str]
    tgt_ids: dict[str, int]
    ct2_id: list[int]  # our target id's row in the export's vocabulary, which leaves PAD out
    end: str

    @classmethod
    def of(cls, reader: LoadedModel) -> Names:
        src, tgt = reader.src_vocab, reader.tgt_vocab
        tgt_names = [tgt.token(i) for i in range(len(tgt))]
        return cls(
            src=[src.token(i) for i in range(len(src))],
            tgt=tgt_names,
            tgt_ids={name: i for i, name in enumerate(tgt_names) if i != PAD},
            ct2_id=[i - (i > PAD) for i in range(len(tgt))],
            end=tgt_names[EOS],
        )


@dataclass
class CTranslate2Engine:
    """Decodes and scores with CTranslate2 (see the module's docstring for what maps how)."""

    translator: Translator
    reader: LoadedModel
    names: Names
    use_vmap: bool = False
    hooks: list[Callable[[], None]] = field(default_factory=list)
    name: ClassVar[str] = "ctranslate2"
    seeds_each_input: ClassVar[bool] = False

    def check(self, options: DecodeConfig, prefixed: bool = False) -> None:
        if options.static_cache:
            raise OptionsError(
                [("static_cache", "{static_cache} is the torch engine's; CTranslate2 keeps its own caches")]
            )
        if prefixed and self.use_vmap:
            raise OptionsError([(None, PREFIX_WITH_SHORTLIST)])
        check_for_model(self.reader.model, options, prefixed)

    def shortlisted(self, shortlist: Shortlist | None) -> CTranslate2Engine:
        """The same translator with or without its vocabulary map; another shortlist is loaded
        into a translator of its own."""
        if shortlist is None:
            return CTranslate2Engine(self.translator, self.reader, self.names, False, self.hooks)
        translator = self.translator
        if shortlist is not translator.shortlist:
            translator = Translator(translator.folder, translator.settings, self.reader, shortlist)
        return CTranslate2Engine(translator, self.reader, self.names, True, self.hooks)

    def between_steps(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Between batches: CTranslate2 decodes a batch in one call."""
        self.hooks.append(hook)
        return lambda: self.hooks.remove(hook)

    def decode(self, request: Request) -> list[list[Hypothesis]]:
        sources, options, on_batch = request.sources, request.options, request.on_batch
        self.check(options, prefixed=request.prefixes is not None)
        check_min_len(sources, options)
        if request.annotations is not None:
            raise ValueError("the ctranslate2 engine reads token sequences, not tags or trees")
        numbers = request.source_numbers()
        forced = (
            checked_prefixes(sources, request.prefixes, options) if request.prefixes is not None else None
        )
        if (
            options.sample
            and options.seed is not None
            and (numbers[:1] == [0] or self.translator.seed != options.seed)
        ):
            self.translator.reseed(options.seed)  # an input begins: its samples repeat with the seed
        results: list[list[Hypothesis]] = [[] for _ in sources]
        todo = [i for i, s in enumerate(sources) if s]
        if on_batch is not None and len(todo) < len(sources):
            on_batch(len(sources) - len(todo), 0)
        lengths = np.asarray([len(sources[i]) + 1 for i in todo])
        for group in make_batches(lengths, options.max_tokens, seed=None, drop_long=False)[0]:
            idx = [todo[g] for g in group]
            prefixed = [forced[i] if forced else [] for i in idx]
            # beam search ranks a prefixed output by its score against the one ending at its prefix
            batch = Batch(
                [list(sources[i]) for i in idx],
                prefixed,
                options,
                scores=request.scores or forced is not None,
            )
            for i, found in zip(idx, self._search(batch), strict=True):
                results[i] = [self._hypothesis(f, options) for f in found]
            if on_batch is not None:
                drawn = [h for i in idx for h in (results[i] if options.sample else results[i][:1])]
                on_batch(len(idx), sum(len(h.tokens) for h in drawn))
            for hook in list(self.hooks):
                hook()
        return results

    def _hypothesis(self, found: Found, options: DecodeConfig) -> Hypothesis:
        """Ours: log P / ((5 + |Y|) / 6)^alpha for beam search, log P for greedy search and samples."""
        if options.search != "beam":
            return Hypothesis(found.tokens, found.log_prob, found.log_prob)
        return Hypothesis(found.tokens, found.score(options.alpha), found.log_prob)

    def _search(self, batch: Batch) -> list[list[Found]]:
        """One batch's outputs, each searched under its sentence's own length limit."""
        if batch.options.search == "beam":
            found, rows = self._under_longest_limit(batch)
            return self._under_own_limits(batch, rows, found)
        found = self._translate(batch, max(batch.limits))
        over = [j for j, outputs in enumerate(found) if any(f.steps > batch.limits[j] for f in outputs)]
        if batch.options.sample or not self.use_vmap:  # a greedy output's first tokens are its own limit's
            return self._cut(batch, over, found)
        return self._under_own_limits(batch, over, found)

    def _under_longest_limit(self, batch: Batch) -> tuple[list[list[Found]], list[int]]:
        """Beam search with a length penalty of the sources without a forced prefix in one call,
        under the batch's longest limit; the outputs, and the sources whose own limit could give
        others (to search again). CTranslate2's search then stops a source once it holds `beam`
        finished hypotheses, however many it returns: asked for all of them, the last-found is
        among them, and where every one ended (by EOS) before the source's own limit, that
        search never reached the limit, and is step for step the search under it."""
        options, rows = batch.options, list(range(len(batch.sources)))
        found: list[list[Found]] = [[] for _ in batch.sources]
        free = [j for j in rows if not batch.prefixes[j]]
        if options.alpha == 0 or not free:  # alpha 0: CTranslate2 stops at its n best, not at `beam`
            return found, rows
        limit = max(batch.limits[j] for j in free)
        searched = self._translate(batch.part(free), limit, options.beam)
        for j, outputs in zip(free, searched, strict=True):
            if all(f.ended and f.steps < batch.limits[j] for f in outputs) or batch.limits[j] == limit:
                found[j] = outputs[: options.nbest]  # in CTranslate2's order, as a call for n gives
        return found, [j for j in rows if not found[j]]

    def _under_own_limits(
        self, batch: Batch, rows: Sequence[int], found: list[list[Found]]
    ) -> list[list[Found]]:
        """`found` with the outputs of `rows` searched again, one call per distinct limit, and
        sources with and without a forced prefix apart (CTranslate2's beam search ends no output
        at the first step after the batch's prefixes, that of sources without one included)."""
        for key in sorted({(batch.limits[j], bool(batch.prefixes[j])) for j in rows}):
            same = [j for j in rows if (batch.limits[j], bool(batch.prefixes[j])) == key]
            for j, outputs in zip(same, self._translate(batch.part(same), key[0]), strict=True):
                found[j] = outputs
        return found

    def _translate(self, batch: Batch, limit: int, hypotheses: int | None = None) -> list[list[Found]]:
        """translate_batch on the batch with one length limit; per source its outputs (the n best,
        or `hypotheses` of a beam search), or samples."""
        options = batch.options
        n = options.num_samples if options.sample else 1
        rows = [j for j in range(len(batch.sources)) for _ in range(n)]
        sources = [self._source(batch.sources[j]) for j in rows]
        prefixes = [[self.names.tgt[t] for t in batch.prefixes[j]] or None for j in rows]
        if self.use_vmap:  # the tokens of the batch this call is part of: its vocabulary map is the batch's
            sources += [self._source(tokens) for tokens in batch.vocab]
            prefixes += [None] * len(batch.vocab)
        results = self.translator.translator.translate_batch(
            sources,
            prefixes,
            max_input_length=0,
            max_decoding_length=limit,
            min_decoding_length=min(options.min_len, limit),
            return_scores=batch.scores,
            return_end_token=True,
            use_vmap=self.use_vmap,
            **_search_settings(options, hypotheses),
        )
        penalty = options.alpha if options.search == "beam" else 0.0
        before = self._prefix_log_probs(batch)
        found: list[list[Found]] = [[] for _ in batch.sources]
        for j, result in zip(rows, results[: len(rows)], strict=True):
            scored = result.scores if batch.scores else [math.nan] * len(result.hypotheses)
            for pieces, score in zip(result.hypotheses, scored, strict=True):
                ended = bool(pieces) and pieces[-1] == self.names.end
                tokens = [self.names.tgt_ids[p] for p in (pieces[:-1] if ended else pieces)]
                steps = len(tokens) + ended
                found[j].append(Found(tokens, ended, score * steps**penalty + before[j]))
        if options.search == "beam" and any(batch.prefixes):
            for j, end in enumerate(self._prefix_ends(batch, limit)):
                if end is not None:
                    ranked = sorted([*found[j], end], key=lambda f: -f.score(options.alpha))
                    found[j] = ranked[: options.nbest]
        return found

    def _prefix_ends(self, batch: Batch, limit: int) -> list[Found | None]:
        """Per source of a beam search, the output that ends right after its forced prefix where
        ours finds it (its EOS among the beam's best continuations, allowed by min_len and the
        limit), which CTranslate2's beam search never outputs: from the logits one greedy step
        after the prefix. None under a vocabulary map, whose logits cover its tokens only."""
        k, min_len = batch.options.beam, batch.options.min_len
        rows = [
            j for j, p in enumerate(batch.prefixes) if p and min_len <= len(p) < min(limit, batch.limits[j])
        ]
        ends: list[Found | None] = [None] * len(batch.sources)
        if not rows or self.use_vmap:
            return ends
        results = self.translator.translator.translate_batch(
            [self._source(batch.sources[j]) for j in rows],
            [[self.names.tgt[t] for t in batch.prefixes[j]] for j in rows],
            beam_size=1,
            max_input_length=0,
            max_decoding_length=max(len(batch.prefixes[j]) for j in rows) + 1,
            min_decoding_length=0,
            return_logits_vocab=True,
            use_vmap=self.use_vmap,
        )
        for j, result in zip(rows, results, strict=True):
            prefix = batch.prefixes[j]
            steps = _log_softmax(np.asarray(result.logits[0], dtype=np.float64)[: len(prefix) + 1])
            end = steps[-1][self.names.ct2_id[EOS]]
            if int((steps[-1] > end).sum()) < k:
                log_prob = sum(row[self.names.ct2_id[t]] for row, t in zip(steps, prefix, strict=False)) + end
                ends[j] = Found(list(prefix), True, float(log_prob))
        return ends

    def _source(self, ids: Sequence[int]) -> list[str]:
        return [*(self.names.src[i] for i in ids), self.names.end]

    def _prefix_log_probs(self, batch: Batch) -> list[float]:
        """log P(prefix | source) per source (0 without one): CTranslate2's scores leave it out."""
        rows = [j for j, p in enumerate(batch.prefixes) if p]
        values = [0.0] * len(batch.sources)
        if rows:
            scored = self._score_rows([batch.sources[j] for j in rows], [batch.prefixes[j] for j in rows])
            for j, log_probs in zip(rows, scored, strict=True):
                values[j] = float(sum(log_probs[:-1]))  # not the EOS that score_batch adds
        return values

    def _cut(self, batch: Batch, rows: list[int], found: list[list[Found]]) -> list[list[Found]]:
        """`found` with the outputs of `rows` that ran past their source's length limit cut to it
        and rescored, in one `score_batch` (their first tokens are searched or drawn as under
        that limit)."""
        cuts = [(j, i) for j in rows for i, f in enumerate(found[j]) if f.steps > batch.limits[j]]
        if not cuts:
            return found
        targets = [found[j][i].tokens[: batch.limits[j]] for j, i in cuts]
        if not batch.scores:
            for (j, i), tokens in zip(cuts, targets, strict=True):
                found[j][i] = Found(tokens, False, math.nan)
            return found
        scored = self._score_rows([batch.sources[j] for j, _ in cuts], targets)
        for (j, i), tokens, log_probs in zip(cuts, targets, scored, strict=True):
            found[j][i] = Found(tokens, False, float(sum(log_probs[:-1])))
        return found

    def _score_rows(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
        """score_batch: per pair each target token's log-probability, then EOS's."""
        results = self.translator.translator.score_batch(
            [self._source(s) for s in sources],
            [[self.names.tgt[t] for t in target] for target in targets],
            max_input_length=0,
        )
        return [list(r.log_probs) for r in results]

    def score(self, request: Request) -> list[Score]:
        sources, targets, max_tokens = request.sources, request.targets, request.options.max_tokens
        per_token, on_batch = request.per_token, request.on_batch
        if targets is None:
            raise ValueError("a scoring request needs targets")
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, not {max_tokens}")
        if request.annotations is not None:
            raise ValueError("the ctranslate2 engine reads token sequences, not tags or trees")
        targets = [check_target(t, f"pair {n}") for n, t in enumerate(targets, 1)]
        top = max((max(t) for t in targets if t), default=-1)
        if top >= len(self.names.tgt):
            raise ValueError(
                f"target token id {top} is outside the target vocabulary ({len(self.names.tgt)} entries)"
            )
        lengths = np.asarray([len(s) + len(t) + 2 for s, t in zip(sources, targets, strict=True)])
        results: list[Score] = [Score(0.0, 0.0)] * len(sources)
        for group in make_batches(lengths, max_tokens, seed=None, drop_long=False)[0]:
            scored = self._score_rows([list(sources[i]) for i in group], [targets[i] for i in group])
            for i, log_probs in zip(group, scored, strict=True):
                total, gold = float(sum(log_probs)), [*targets[i], EOS]
                listed = ([float(x) for x in log_probs], gold) if per_token else (None, None)
                results[i] = Score(total, total / len(gold), listed[0], len(gold), listed[1])
            if on_batch is not None:
                on_batch(len(group), sum(len(targets[i]) for i in group))
        return results


@dataclass
class Batch:
    """Sources decoded in one call, their forced prefixes (empty: none) and length limits."""

    sources: list[list[int]]
    prefixes: list[list[int]]
    options: DecodeConfig
    vocab: list[list[int]] = field(default_factory=list)  # a part's: the whole batch's source tokens
    scores: bool = True  # False: the outputs' log-probabilities are not wanted (left NaN)
    limits: list[int] = field(init=False)

    def __post_init__(self) -> None:
        a, b = self.options.max_len_a, self.options.max_len_b
        self.limits = [max_output_length(len(s), a, b) for s in self.sources]

    def part(self, rows: list[int]) -> Batch:
        """The sources `rows`, carrying the batch's distinct source tokens in rows no longer than
        its longest source (a shortlist's vocabulary map lists a call's source tokens)."""
        tokens = sorted({t for s in self.sources for t in s})
        width = max(len(s) for s in self.sources)
        vocab = [tokens[i : i + width] for i in range(0, len(tokens), width)]
        sources, prefixes = [self.sources[j] for j in rows], [self.prefixes[j] for j in rows]
        return Batch(sources, prefixes, self.options, vocab, self.scores)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    top = logits.max(-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


def _search_settings(options: DecodeConfig, hypotheses: int | None = None) -> dict[str, Any]:
    """translate_batch's search settings: sampling, greedy search (beam 1) or beam search; the
    length penalty only for beam search (scores are then log P / |Y|^alpha)."""
    if options.sample:
        return {
            "beam_size": 1,
            "length_penalty": 0.0,
            "sampling_topk": options.top_k,
            "sampling_topp": options.top_p,
            "sampling_temperature": options.temperature,
        }
    if options.greedy:
        return {"beam_size": 1, "length_penalty": 0.0}
    n = hypotheses or options.nbest
    return {"beam_size": options.beam, "num_hypotheses": n, "length_penalty": options.alpha}
