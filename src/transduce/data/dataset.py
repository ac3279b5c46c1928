"""Binarised datasets: token ids in flat .npy arrays with offsets, memory-mapped on load.

A dataset directory holds `meta.json` (written last), the vocabularies (`src.*`, `tgt.*`)
and, per split, `{split}.{src,tgt}.{tokens,offsets}.npy`. It is built in a temporary
directory and renamed into place, so an interrupted build never leaves anything that loads.
A split larger than memory is written in chunks: the first saved, the others appended.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..config import DataConfig
from ..fileio import atomic_directory
from .meta import DatasetMeta, MetaError, read_model
from .source import SourceAnnotation
from .vocab import SymbolVocab, Vocab, load_vocab, vocab_exists


class DatasetError(ValueError):
    """A dataset directory that is missing, incomplete or of another format."""


@dataclass
class Split:
    """Aligned source/target id sequences of one split, and optional source annotations:
    tag ids per factor aligned with the source tokens, and per example a flattened n x n
    matrix of tree distances between its source tokens."""

    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray
    src_factors: np.ndarray | None = None  # (k, total source tokens)
    omega: np.ndarray | None = None  # flat, example i at omega_offsets[i]:omega_offsets[i + 1]
    omega_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            self.src_tokens[self.src_offsets[i] : self.src_offsets[i + 1]],
            self.tgt_tokens[self.tgt_offsets[i] : self.tgt_offsets[i + 1]],
        )

    def annotation(self, i: int) -> SourceAnnotation:
        factors = omega = None
        if self.src_factors is not None:
            factors = np.asarray(self.src_factors[:, self.src_offsets[i] : self.src_offsets[i + 1]])
        if self.omega is not None and self.omega_offsets is not None:
            n = int(self.src_offsets[i + 1] - self.src_offsets[i])
            omega = np.asarray(self.omega[self.omega_offsets[i] : self.omega_offsets[i + 1]]).reshape(n, n)
        return SourceAnnotation(factors, omega)

    @property
    def annotated(self) -> bool:
        return self.src_factors is not None or self.omega is not None

    @classmethod
    def from_lists(
        cls, src: list[list[int]], tgt: list[list[int]], annotations: list[SourceAnnotation] | None = None
    ) -> Split:
        def flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), out=offsets[1:])
            tokens = np.fromiter(chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
            return tokens, offsets

        split = cls(*flat(src), *flat(tgt))
        if annotations and annotations[0].factors is not None:
            split.src_factors = np.concatenate([a.factors for a in annotations], axis=1).astype(np.int32)
        if annotations and annotations[0].omega is not None:
            matrices = [a.omega.reshape(-1) for a in annotations]
            split.omega = np.concatenate(matrices).astype(np.int16)
            split.omega_offsets = np.zeros(len(matrices) + 1, dtype=np.int64)
            np.cumsum([m.size for m in matrices], out=split.omega_offsets[1:])
        return split

    def save(self, directory: Path, name: str) -> None:
        for side in ("src", "tgt"):
            np.save(directory / f"{name}.{side}.tokens.npy", getattr(self, f"{side}_tokens"))
            np.save(directory / f"{name}.{side}.offsets.npy", getattr(self, f"{side}_offsets"))
        for extra in ("src_factors", "omega", "omega_offsets"):
            if getattr(self, extra) is not None:
                np.save(directory / f"{name}.{extra}.npy", getattr(self, extra))

    def append_to(self, directory: Path, name: str) -> None:
        """Add this split's examples after those of the split `name` saved in `directory`
        (offsets continued). Factor rows are kept in parts until `join_appended` joins them."""
        for side in ("src", "tgt"):
            _append(directory / f"{name}.{side}.tokens.npy", getattr(self, f"{side}_tokens"))
            _append(directory / f"{name}.{side}.offsets.npy", getattr(self, f"{side}_offsets"), offsets=True)
        if self.omega is not None and self.omega_offsets is not None:
            _append(directory / f"{name}.omega.npy", self.omega)
            _append(directory / f"{name}.omega_offsets.npy", self.omega_offsets, offsets=True)
        for k, row in enumerate(self.src_factors if self.src_factors is not None else []):
            _append(directory / f"{name}.src_factors.part{k}.npy", row)

    @classmethod
    def load(cls, directory: Path, name: str) -> Split:
        arrays = [
            _array(directory / f"{name}.{side}.{kind}.npy")
            for side in ("src", "tgt")
            for kind in ("tokens", "offsets")
        ]
        extras = {
            extra: _array(path)
            for extra in ("src_factors", "omega", "omega_offsets")
            if (path := directory / f"{name}.{extra}.npy").exists()
        }
        return cls(*arrays, **extras)


def tagged(split: Split, tag: int) -> Split:
    """`split` (plain text: no factors or trees) with every source starting with the token `tag`:
    a multilingual dataset's target-language tag."""
    offsets = split.src_offsets
    tokens = np.insert(split.src_tokens, offsets[:-1], tag).astype(split.src_tokens.dtype)
    return Split(
        tokens, offsets + np.arange(len(offsets), dtype=offsets.dtype), split.tgt_tokens, split.tgt_offsets
    )


def _append(path: Path, values: np.ndarray, offsets: bool = False) -> None:
    """Add a 1-d array's values at the end of the .npy file `path` (written by np.save if it is
    not there): the header is rewritten in place (np.save leaves room for any length), so the
    file is byte for byte what np.save writes for the whole array. `offsets` continue the
    file's last offset and drop the chunk's leading 0."""
    if not path.exists():
        np.save(path, values)
        return
    with path.open("r+b") as f:
        np.lib.format.read_magic(f)
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        start = f.tell()
        if offsets:
            f.seek(-dtype.itemsize, io.SEEK_END)
            values = values[1:] + np.frombuffer(f.read(dtype.itemsize), dtype=dtype)[0]
        header = io.BytesIO()
        descr = np.lib.format.dtype_to_descr(dtype)
        shape = (shape[0] + len(values),)
        np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
        if dtype != values.dtype or header.tell() != start:
            raise ValueError(f"{path}: cannot append {values.dtype} values to this file's {dtype} ones")
        f.seek(0)
        f.write(header.getvalue())
        f.seek(0, io.SEEK_END)
        f.write(np.ascontiguousarray(values).data)


def join_appended(directory: Path, name: str) -> None:
    """Join the factor rows that `Split.append_to` kept in parts to the (k, tokens) array saved
    for split `name`, copying in blocks, into the file np.save writes for the whole array."""
    parts = sorted(
        directory.glob(f"{name}.src_factors.part*.npy"), key=lambda p: int(p.stem.rsplit("part")[-1])
    )
    if not parts:
        return
    saved = directory / f"{name}.src_factors.npy"
    head = _npy_layout(saved) if saved.exists() else None
    tails = [_npy_layout(p) for p in parts]
    dtype = tails[0][2]
    head_len = head[1][1] if head is not None else 0
    shape = (len(parts), head_len + tails[0][1][0])
    joined = directory / f"{name}.src_factors.joined"
    with joined.open("wb") as out:
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(out, header)
        for k, (part, tail) in enumerate(zip(parts, tails, strict=True)):
            if head is not None:
                _copy_bytes(saved, head[0] + k * head_len * dtype.itemsize, head_len * dtype.itemsize, out)
            _copy_bytes(part, tail[0], tail[1][0] * dtype.itemsize, out)
    joined.replace(saved)
    for part in parts:
        part.unlink()


def _npy_layout(path: Path) -> tuple[int, tuple[int, ...], np.dtype]:
    """Where a .npy file's data starts, its shape and its dtype."""
    with path.open("rb") as f:
        np.lib.format.read_magic(f)
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        return f.tell(), shape, dtype


def _copy_bytes(path: Path, start: int, size: int, out: BinaryIO) -> None:
    with path.open("rb") as f:
        f.seek(start)
        while size > 0:
            block = f.read(min(size, 1 << 20))
            out.write(block)
            size -= len(block)


def _array(path: Path) -> np.ndarray:
    """A dataset array, memory-mapped: a regular file of integers. A pipe or device in its place
    would block the reader; a link could take the data from outside the dataset, as could
    anything else its meta.json and hash do not describe; float ids would be truncated."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OSError(f"{path}: not a regular file (links, pipes and devices are refused)")
    array = np.load(path, mmap_mode="r")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{path}: holds {array.dtype} values; dataset arrays hold integers")
    return array


class Dataset:
    """A prepared dataset: vocabularies, splits and the report of how it was made."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        meta_file = self.dir / "meta.json"
        if not meta_file.exists():
            raise DatasetError(f"{self.dir}: not a prepared dataset (no meta.json); run `transduce prepare`")
        try:
            self.meta: DatasetMeta = read_model(meta_file, DatasetMeta)
            self.src_vocab = load_vocab(self.dir / "src")
            tgt = self.dir / "tgt"
            self.tgt_vocab = load_vocab(tgt) if vocab_exists(tgt) else self.src_vocab
            self.splits = {name: Split.load(self.dir, name) for name in self.meta.splits}
            self.factor_vocabs = [load_vocab(self.dir / f"src.factor{k}") for k in range(self.meta.factors)]
            self.pair_ids = {name: _array(self.dir / f"{name}.pair.npy") for name in self._paired()}
        except (MetaError, OSError, ValueError, RuntimeError) as exc:
            raise DatasetError(f"{self.dir}: damaged dataset: {exc}") from None
        self._check_sizes()
        self._check_offsets()
        self._check_ids()
        self._check_pairs()

    def _paired(self) -> list[str]:
        """The splits that say which language pair each example is of (a multilingual dataset's)."""
        return list(self.meta.splits) if self.meta.languages else []

    def _check_pairs(self) -> None:
        """One pair id per example, each naming one of meta.json's pairs."""
        for name, ids in self.pair_ids.items():
            if ids.ndim != 1 or len(ids) != len(self.splits[name]):
                raise DatasetError(f"{self.dir}: {name}.pair.npy does not give one pair per example")
            if len(ids) and not 0 <= int(ids.min()) <= int(ids.max()) < len(self.meta.languages):
                raise DatasetError(f"{self.dir}: {name}.pair.npy names pairs meta.json does not list")

    def _check_sizes(self) -> None:
        """meta.json must describe the files: checkpoints copy its vocabulary sizes, and a model
        built for other sizes than the vocabularies' would not load."""
        for side, vocab, size in (
            ("src", self.src_vocab, self.meta.src_vocab_size),
            ("tgt", self.tgt_vocab, self.meta.tgt_vocab_size),
        ):
            if len(vocab) != size:
                raise DatasetError(
                    f"{self.dir}: meta.json gives {side}_vocab_size {size}, but the {side} vocabulary has "
                    f"{len(vocab)} entries; prepare the dataset again"
                )
        for name, split in self.splits.items():
            if self.meta.sizes.get(name) != len(split):
                raise DatasetError(
                    f"{self.dir}: meta.json gives the {name} split {self.meta.sizes.get(name)} examples, "
                    f"its arrays hold {len(split)}; prepare the dataset again"
                )

    def _check_ids(self) -> None:
        """Token ids beyond the vocabulary would index past the embedding table mid-training."""
        for name, split in self.splits.items():
            for side, tokens, vocab in (
                ("src", split.src_tokens, self.src_vocab),
                ("tgt", split.tgt_tokens, self.tgt_vocab),
            ):
                if len(tokens) and not 0 <= int(tokens.min()) <= int(tokens.max()) < len(vocab):
                    raise DatasetError(
                        f"{self.dir}: {name}.{side} holds token ids outside the vocabulary of {len(vocab)}"
                    )

    def _check_offsets(self) -> None:
        """Example i is the slice offsets[i]:offsets[i + 1] of a flat array: the offsets must start
        at 0, never go back (an example of negative length breaks batching far from here) and end
        at the array's length, with as many examples on every side."""
        for name, split in self.splits.items():
            sides = [
                ("src", split.src_offsets, split.src_tokens),
                ("tgt", split.tgt_offsets, split.tgt_tokens),
            ]
            if split.omega is not None and split.omega_offsets is not None:
                sides.append(("omega", split.omega_offsets, split.omega))
            for side, offsets, flat in sides:
                if offsets.ndim != 1 or len(offsets) != len(split) + 1:
                    raise DatasetError(f"{self.dir}: {name}.{side} offsets do not give {len(split)} examples")
                if int(offsets[0]) != 0 or (np.diff(offsets) < 0).any():
                    raise DatasetError(
                        f"{self.dir}: {name}.{side} offsets decrease (or do not start at 0); "
                        "prepare the dataset again"
                    )
                if int(offsets[-1]) != len(flat):
                    raise DatasetError(f"{self.dir}: {name} offsets do not match its token arrays")

    @functools.cached_property
    def arrays_sha256(self) -> str:
        """One hash over the splits' array files: meta.json's hash is of prepare's inputs, so it
        stays the same when an array is edited afterwards, and this one does not."""
        return content_hash(
            [p for name in self.meta.splits for p in sorted(self.dir.glob(f"{name}.*.npy"))], {}
        )

    def gold_trees(self, split: str) -> list[str]:
        """The bracketed gold trees of a parsing dataset's split, one per example."""
        return (self.dir / f"{split}.trees.txt").read_text(encoding="utf-8").splitlines()


def content_hash(files: list[Path], options: dict) -> str:
    """Hash of input bytes and options: equal hashes mean `prepare` has nothing to do."""
    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for path in files:
        h.update(path.name.encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def is_up_to_date(out: Path, digest: str) -> bool:
    meta = out / "meta.json"
    if not meta.exists():
        return False
    with contextlib.suppress(ValueError):
        return json.loads(meta.read_text(encoding="utf-8")).get("hash") == digest
    return False


def write_dataset(
    out: Path,
    splits: dict[str, Split],
    src_vocab: Vocab,
    tgt_vocab: Vocab | None,
    meta: dict[str, Any],
    texts: dict[str, list[str]] | None = None,
    vocabs: dict[str, SymbolVocab] | None = None,
    inputs: tuple[Path, ...] = (),
    force: bool = False,
) -> None:
    """Write splits, vocabularies (plus `vocabs`: prefix -> vocabulary), `texts` (file name ->
    lines) and meta.json (last), atomically; `out` is checked against `inputs` and replaced only
    if `prepare` wrote it (or `force`). `meta` holds the DatasetMeta fields of the dataset's kind."""
    with atomic_directory(out, "prepare", inputs, force) as tmp:
        for name, lines in (texts or {}).items():
            (tmp / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        for name, split in splits.items():
            split.save(tmp, name)
        finish_dataset(tmp, {name: len(s) for name, s in splits.items()}, src_vocab, tgt_vocab, meta, vocabs)


def finish_dataset(
    directory: Path,
    sizes: dict[str, int],
    src_vocab: Vocab,
    tgt_vocab: Vocab | None,
    meta: dict[str, Any],
    vocabs: dict[str, SymbolVocab] | None = None,
) -> None:
    """Complete a dataset whose splits (`sizes`: examples per split) are written in `directory`:
    the vocabularies, then meta.json, last. `meta` holds the DatasetMeta fields of its kind."""
    full = DatasetMeta(
        **meta,
        splits=list(sizes),
        sizes=sizes,
        src_vocab_size=len(src_vocab),
        tgt_vocab_size=len(tgt_vocab or src_vocab),
    )
    for prefix, vocab in (vocabs or {}).items():
        vocab.save(directory / prefix)
    src_vocab.save(directory / "src")
    if tgt_vocab is not None:
        tgt_vocab.save(directory / "tgt")
    # A dataset of one pair writes no `languages`: its meta.json stays what it was before datasets
    # could hold several (the same bytes, tests/test_prepare_bytes.py).
    unused = {"languages"} if not full.languages else None
    (directory / "meta.json").write_text(full.model_dump_json(indent=2, exclude=unused), encoding="utf-8")


def prepare_task(cfg: DataConfig, out: Path, force: bool = False) -> Dataset:
    """Write the generated task's splits as a dataset (a no-op when already up to date)."""
    from .tasks import LABELS, SPLITS, generate_split, task_symbols

    task_fields = {k: v for k, v in cfg.model_dump().items() if k.startswith("task") or k == "seed"}
    task_fields["task_test_max_len"] = cfg.long_max_len  # the default, resolved: same data, same hash
    # keys added later enter the hash only when set, so earlier task datasets stay up to date
    for key, default in (("task_train_min_len", 1), ("task_test_min_len", cfg.task_train_max_len + 1)):
        if task_fields[key] in (None, default):
            del task_fields[key]
    digest = content_hash([], {"kind": "task", **task_fields})
    if not is_up_to_date(out, digest):
        vocab = SymbolVocab(task_symbols(cfg))
        meta: dict[str, Any] = {"hash": digest, "data_kind": "task", "task": cfg.task}
        labels = None
        if cfg.task in LABELS:  # classification: the labels are the target vocabulary
            unit, names = LABELS[cfg.task]
            labels = SymbolVocab(names)
            meta.update(data_kind="labels", label_unit=unit)
        splits = {}
        for name in SPLITS:
            pairs = generate_split(cfg, name)
            splits[name] = Split.from_lists(
                [vocab.encode(s) for s, _ in pairs], [(labels or vocab).encode(t) for _, t in pairs]
            )
        write_dataset(out, splits, vocab, labels, meta, force=force)
    return Dataset(out)
