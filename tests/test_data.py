"""Data: corpus validation errors, prepare idempotence and atomicity, batching, generated tasks."""

import numpy as np
import pytest

from transduce.config import DataConfig
from transduce.data import dataset as dataset_mod
from transduce.data.batching import (
    BatchSampler,
    _stable_argsort,
    batch_shapes,
    collate,
    encode_sources,
    encode_targets,
    make_batches,
    padding_efficiency,
)
from transduce.data.corpus import CorpusError, read_parallel
from transduce.data.dataset import Dataset, DatasetError, Split, prepare_task
from transduce.data.prepare import PrepareOptions, prepare_text
from transduce.data.tasks import generate_split
from transduce.data.vocab import BOS, EOS, PAD

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "from", "home"]


def write_corpus(folder, n=60, seed=0):
    rng = np.random.default_rng(seed)
    for split, size in (("train", n), ("dev", 10), ("test", 5)):
        src = [" ".join(rng.choice(WORDS, rng.integers(1, 9))) for _ in range(size)]
        (folder / f"{split}.src").write_text("\n".join(src) + "\n", encoding="utf-8")
        (folder / f"{split}.tgt").write_text("\n".join(s.upper() for s in src) + "\n", encoding="utf-8")


def test_mismatched_line_counts_name_both_files(tmp_path):
    (tmp_path / "a.src").write_text("x\ny\nz\n")
    (tmp_path / "a.tgt").write_text("x\ny\n")
    with pytest.raises(CorpusError, match=r"a\.src has 3 lines, .*a\.tgt has 2"):
        read_parallel(tmp_path / "a.src", tmp_path / "a.tgt")


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "a.src").write_bytes(b"ok\nalso ok\nbad \xff byte\n")
    (tmp_path / "a.tgt").write_text("1\n2\n3\n")
    with pytest.raises(CorpusError, match=r"a\.src:3: invalid UTF-8"):
        read_parallel(tmp_path / "a.src", tmp_path / "a.tgt")


def test_empty_lines_skipped_and_counted_or_rejected(tmp_path):
    (tmp_path / "a.src").write_text("one\n\nthree\n   \n")
    (tmp_path / "a.tgt").write_text("1\n2\n3\n4\n")
    src, tgt, stats = read_parallel(tmp_path / "a.src", tmp_path / "a.tgt")
    assert (src, tgt, stats.skipped_empty) == (["one", "three"], ["1", "3"], 2)
    with pytest.raises(CorpusError, match=r"a\.src:2: empty line"):
        read_parallel(tmp_path / "a.src", tmp_path / "a.tgt", empty="reject")


def test_tabs_and_control_characters(tmp_path):
    (tmp_path / "a.src").write_text("a\tb\nc\n")
    (tmp_path / "a.tgt").write_text("x\ny\x07z\n")
    with pytest.raises(CorpusError, match=r"a\.src:1: contains a tab"):
        read_parallel(tmp_path / "a.src", tmp_path / "a.tgt", tabs="reject")
    with pytest.raises(CorpusError, match=r"a\.tgt:2: contains control character U\+0007"):
        read_parallel(tmp_path / "a.src", tmp_path / "a.tgt", control="reject")
    src, tgt, stats = read_parallel(tmp_path / "a.src", tmp_path / "a.tgt")
    assert (src, tgt) == (["a b"], ["x"]) and stats.skipped_control == 1
    assert stats.first_control.endswith("a.tgt:2: contains control character U+0007")


def test_missing_file_is_reported(tmp_path):
    write_corpus(tmp_path)
    (tmp_path / "dev.tgt").unlink()
    with pytest.raises(CorpusError, match=r"dev\.tgt: file not found"):
        prepare_text(tmp_path, tmp_path / "out", PrepareOptions("src", "tgt", vocab_size=400), False)


def test_prepare_round_trips_and_is_idempotent(tmp_path):
    write_corpus(tmp_path)
    out = tmp_path / "out"
    opts = PrepareOptions("src", "tgt", vocab_size=400)
    report = prepare_text(tmp_path, out, opts, False)
    assert not report["up_to_date"] and report["splits"]["train"]["pairs"] == 60
    ds = Dataset(out)
    assert set(ds.splits) == {"train", "dev", "test"}
    first = (tmp_path / "train.src").read_text().splitlines()[0]
    src_ids, _ = ds.splits["train"].pair(0)
    assert ds.src_vocab.decode(src_ids.tolist()) == first
    stamp = (out / "meta.json").stat().st_mtime_ns
    assert prepare_text(tmp_path, out, opts, False)["up_to_date"]
    assert (out / "meta.json").stat().st_mtime_ns == stamp


def test_interrupted_prepare_leaves_nothing_loadable(tmp_path, monkeypatch):
    write_corpus(tmp_path)
    out = tmp_path / "out"
    calls = []

    def crash(self, directory, name):
        calls.append(name)
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated interruption")
        return original(self, directory, name)

    original = dataset_mod.Split.save
    monkeypatch.setattr(dataset_mod.Split, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        prepare_text(tmp_path, out, PrepareOptions("src", "tgt", vocab_size=400), False)
    assert not out.exists()
    assert not list(tmp_path.glob(".out.tmp-*"))
    with pytest.raises(DatasetError, match="not a prepared dataset"):
        Dataset(out)


def test_length_filter_counts(tmp_path):
    write_corpus(tmp_path)
    with (tmp_path / "train.src").open("a") as f:
        f.write(" ".join(["cat"] * 80) + "\n")
    with (tmp_path / "train.tgt").open("a") as f:
        f.write("CAT\n")
    report = prepare_text(
        tmp_path, tmp_path / "o", PrepareOptions("src", "tgt", vocab_size=400, max_len=40), False
    )
    assert report["splits"]["train"]["skipped_too_long"] == 1
    assert report["splits"]["train"]["pairs"] == 60


def test_batches_respect_budget_and_cover_each_example_once():
    rng = np.random.default_rng(3)
    lengths = rng.integers(2, 60, 1000)
    batches, dropped = make_batches(lengths, 300, seed=1)
    assert dropped == 0
    assert all(len(b) * lengths[b].max() <= 300 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert padding_efficiency(batches, lengths) > 0.9
    sampler = BatchSampler(lengths, 300, seed=1)
    epoch = sampler.epoch_batches(0)
    assert sorted(i for b in epoch for i in b) == list(range(1000))
    assert all(isinstance(b, np.ndarray) for b in epoch)  # views of one array, not Python lists
    assert [b.tolist() for b in epoch] != [b.tolist() for b in sampler.epoch_batches(1)]  # reshuffled


def test_too_long_examples_are_dropped_not_overflowing():
    batches, dropped = make_batches(np.array([5, 500, 7]), 100, seed=0)
    assert dropped == 1 and sorted(i for b in batches for i in b) == [0, 2]
    kept, none_dropped = make_batches(np.array([5, 500, 7]), 100, seed=None, drop_long=False)
    assert (kept, none_dropped) == ([[0, 2], [1]], 0)  # decoding: the long one alone, nothing lost


def test_ranks_get_disjoint_equal_shards_covering_data():
    lengths = np.random.default_rng(0).integers(2, 50, 777)
    shards = [BatchSampler(lengths, 256, seed=5, rank=r, world=2).epoch_batches(0) for r in range(2)]
    assert len(shards[0]) == len(shards[1])
    seen = [set(i for b in s for i in b) for s in shards]
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == set(range(777))


def test_sampler_resumes_mid_epoch():
    lengths = np.random.default_rng(0).integers(2, 50, 300)
    straight = BatchSampler(lengths, 200, seed=2)
    it = iter(straight)
    expected = [next(it).tolist() for _ in range(25)]
    first = BatchSampler(lengths, 200, seed=2)
    it = iter(first)
    got = [next(it).tolist() for _ in range(11)]
    resumed = BatchSampler(lengths, 200, seed=2)
    resumed.load_state_dict(first.state_dict())
    it = iter(resumed)
    got += [next(it).tolist() for _ in range(14)]
    assert got == expected


def test_collate_adds_bos_eos_and_pads(tmp_path):
    ds = prepare_task(DataConfig(task="copy", task_train_size=20, task_eval_size=5), tmp_path / "d")
    batch = collate(ds.splits["train"], [0, 1, 2])
    for row, i in enumerate([0, 1, 2]):
        s, t = ds.splits["train"].pair(i)
        assert batch.src[row, : len(s) + 1].tolist() == [*s.tolist(), EOS]
        assert batch.tgt_in[row, : len(t) + 1].tolist() == [BOS, *t.tolist()]
        assert batch.tgt_out[row, : len(t) + 1].tolist() == [*t.tolist(), EOS]
        assert batch.tgt_out[row, len(t) + 1 :].eq(PAD).all()


def _naive_padded(rows: list[list[int]]) -> list[list[int]]:
    width = max(len(r) for r in rows)
    return [r + [PAD] * (width - len(r)) for r in rows]


@pytest.mark.parametrize("joined", [False, True])
def test_collate_matches_a_row_by_row_construction(joined):
    rng = np.random.default_rng(3)
    src_len, tgt_len = rng.integers(1, 9, 40), rng.integers(0, 9, 40)  # some empty targets
    split = Split(
        rng.integers(4, 50, int(src_len.sum())).astype(np.int32),
        np.concatenate([[0], np.cumsum(src_len)]),
        rng.integers(4, 50, int(tgt_len.sum())).astype(np.int32),
        np.concatenate([[0], np.cumsum(tgt_len)]),
    )
    indices = rng.permutation(40)[:13].tolist()
    batch = collate(split, indices, joined=joined)
    pairs = [split.pair(i) for i in indices]
    tgt = [[*s.tolist(), *t.tolist()] if joined else t.tolist() for s, t in pairs]
    assert batch.src.tolist() == _naive_padded([[*s.tolist(), EOS] for s, _ in pairs])
    assert batch.tgt_in.tolist() == _naive_padded([[BOS, *t] for t in tgt])
    assert batch.tgt_out.tolist() == _naive_padded([[*t, EOS] for t in tgt])
    assert batch.indices == indices


def test_encode_sources_and_targets_pad_like_a_row_by_row_construction():
    lines = [[5, 6, 7], [], [9], [4, 4, 4, 4, 4]]
    assert encode_sources(lines).tolist() == _naive_padded([[*line, EOS] for line in lines])
    tgt_in, tgt_out = encode_targets(lines)
    assert tgt_in.tolist() == _naive_padded([[BOS, *line] for line in lines])
    assert tgt_out.tolist() == _naive_padded([[*line, EOS] for line in lines])


def _digits(text: str) -> str:
    return text.replace(" ", "").replace("_", " ")


@pytest.mark.parametrize("task", ["copy", "reverse", "addition", "lte"])
def test_generated_targets_are_correct(task):
    cfg = DataConfig(task=task, task_train_max_len=5, task_test_max_len=9, task_eval_size=200)
    for split in ("dev", "test_long"):
        pairs = generate_split(cfg, split)
        assert pairs == generate_split(cfg, split)  # seeded
        for src, tgt in pairs:
            if task == "copy":
                assert tgt == src
            elif task == "reverse":
                assert tgt.split() == list(reversed(src.split()))
            elif task == "addition":
                a, b = _digits(src).split("+")
                assert int(_digits(tgt)) == int(a) + int(b)
            else:
                printed = []
                exec(_digits(src), {"__builtins__": {}}, {"print": printed.append})
                assert printed == [int(_digits(tgt))]
    longest = max(len(s.split()) for s, _ in generate_split(cfg, "dev"))
    long_min = min(len(s.split()) for s, _ in generate_split(cfg, "test_long"))
    if task in ("copy", "reverse"):
        assert longest <= 5 < long_min


def test_task_dataset_is_idempotent(tmp_path):
    cfg = DataConfig(task="reverse", task_train_size=50, task_eval_size=10)
    ds = prepare_task(cfg, tmp_path / "t")
    assert set(ds.splits) == {"train", "dev", "test", "test_long"}
    stamp = (tmp_path / "t" / "meta.json").stat().st_mtime_ns
    prepare_task(cfg, tmp_path / "t")
    assert (tmp_path / "t" / "meta.json").stat().st_mtime_ns == stamp


def test_bpe_round_trips_any_text_and_rejects_tiny_vocab():
    from transduce.data.vocab import SentencePieceVocab, SymbolVocab

    lines = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 20
    vocab = SentencePieceVocab.train(lines, 320)
    for text in ["the cat  sat ", "Ünïcödé 中文 🎉 never seen", "  spaced\tout  ", "x" * 500]:
        assert vocab.decode(vocab.encode(text)) == text
    with pytest.raises(ValueError, match="too small"):
        SentencePieceVocab.train(lines, 50)
    sym = SymbolVocab(["1", "2", "+"])
    assert sym.decode(sym.encode("1 + 2 2")) == "1 + 2 2"


def _pairs(characters: str, count: int) -> list[bytes]:
    """`count` sampled pairs ("source\ntarget", UTF-8) that use every one of `characters`."""
    return [f"{characters[i % len(characters)]}x\ny".encode() for i in range(max(count, len(characters)))]


class _Unread:
    """A sample that must not be read."""

    def __iter__(self):
        raise AssertionError("the sample was read")


CJK = "".join(chr(0x4E00 + i) for i in range(3000))  # with x, y and the space: 3,003 characters

# (training pairs, the sample, tree symbols, the size): a piece per 5 pairs from 1,000 to
# 37,000, and never fewer than 256 byte pieces + 4 specials + the symbols + the characters (the
# space among them, which sentencepiece puts before every sentence).
DEFAULT_SIZES = [
    (1_500, _pairs("ab", 10), 0, 1_000),
    (20_000, _pairs("ab", 10), 0, 4_000),
    (20_004, _pairs("ab", 10), 0, 4_000),
    (100_000, _pairs("ab", 10), 40, 20_000),
    (185_000, _Unread(), 0, 37_000),
    (4_500_000, _Unread(), 0, 37_000),
    (2_000, _pairs(CJK, 3000), 0, 3_263),
    (20_000, _pairs(CJK, 3000), 30, 4_000),
    (2_000, _pairs(CJK[:900], 900), 10, 1_173),
]


@pytest.mark.parametrize(("pairs", "sample", "symbols", "size"), DEFAULT_SIZES)
def test_the_default_vocabulary_size_is_scaled_to_the_corpus(pairs, sample, symbols, size):
    from transduce.data.vocab_size import default_vocab_size

    assert default_vocab_size(pairs, sample, symbols) == size


@pytest.mark.parametrize("space", [" ", ""])
def test_the_default_size_is_the_smallest_sentencepiece_takes_when_characters_decide(space):
    """Where the characters set the size, it is the least byte fallback accepts: one piece
    fewer is sentencepiece's own refusal, with or without spaces in the text."""
    from transduce.data.vocab import SentencePieceVocab
    from transduce.data.vocab_size import default_vocab_size

    sample = [f"{CJK[i % 1200]}{CJK[i * 7 % 1200]}{space}x\ny{space}z".encode() for i in range(1500)]
    size = default_vocab_size(len(sample), sample, 0)
    lines = [line for pair in sample for line in pair.decode().split("\n")]
    assert len(SentencePieceVocab.train(lines, size)) == size
    with pytest.raises(ValueError, match="too small"):
        SentencePieceVocab.train(lines, size - 1)


def test_prepare_without_vocab_size_says_what_it_chose(tmp_path):
    """The size `prepare` chose is said on stderr; meta.json records the option as not given."""
    import json

    from typer.testing import CliRunner

    from transduce.cli import app

    write_corpus(tmp_path, n=300)
    result = CliRunner().invoke(app, ["prepare", str(tmp_path), "-o", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "vocabulary size 1,000 for 300 training pairs (--vocab-size not given" in result.stderr
    assert json.loads((tmp_path / "d" / "meta.json").read_text())["options"]["vocab_size"] is None


def test_sampler_with_nothing_that_fits_fails_instead_of_looping():
    sampler = BatchSampler(np.array([50, 60]), max_tokens=40, seed=0)
    with pytest.raises(ValueError, match=r"max_tokens=40 .* shortest padded example has 50"):
        next(iter(sampler))


def test_batch_shapes_read_only_their_own_rows_and_match_the_plain_computation(monkeypatch):
    """The trainer counts an epoch's shapes as it starts: they must cost the batches, not the
    split once per batch (that took minutes at 5M pairs). Each batch's widths against the padded
    lengths computed the plain way, batch by batch."""
    rng = np.random.default_rng(0)
    lines = [rng.integers(4, 50, rng.integers(1, 30)).tolist() for _ in range(200)]
    targets = [rng.integers(4, 50, rng.integers(1, 30)).tolist() for _ in range(200)]
    split = Split.from_lists(lines, targets)
    src_lengths, tgt_lengths = split.src_lengths, split.tgt_lengths

    def whole_split(self):
        raise AssertionError("a batch's shape read the whole split's lengths")

    monkeypatch.setattr(Split, "src_lengths", property(whole_split))
    monkeypatch.setattr(Split, "tgt_lengths", property(whole_split))
    batches = [[0], [3, 150, 7], list(range(200)), [199, 5]]
    for joined, multiple in ((False, 1), (True, 8)):
        expected = []
        for indices in batches:
            src, tgt = src_lengths[indices], tgt_lengths[indices] + (src_lengths[indices] if joined else 0)
            up = [-(-(int(side.max()) + 1) // multiple) * multiple for side in (src, tgt)]
            expected.append((len(indices), *up))
        assert batch_shapes(split, batches, joined, multiple) == expected
    assert batch_shapes(split, [], False, 1) == []


def _batches_one_by_one(lengths, max_tokens, seed, drop_long):
    """The budget rule example by example, in the same order: the reference for make_batches."""
    if seed is None:
        order = np.argsort(lengths, kind="stable")
    else:
        order = np.lexsort((np.random.default_rng(seed).random(len(lengths)), lengths))
    batches, current, longest, dropped = [], [], 0, 0
    for i in order.tolist():
        length = int(lengths[i])
        if length > max_tokens and drop_long:
            dropped += 1
            continue
        if current and max(longest, length) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    return batches + ([current] if current else []), dropped


def test_the_stable_argsort_is_numpys_whatever_the_ties():
    rng = np.random.default_rng(12)
    for size, distinct in ((0, 1), (1, 1), (50, 1), (1000, 3), (1000, 400), (5000, 10**9)):
        values = rng.integers(0, distinct, size).astype(np.float64) / distinct
        assert np.array_equal(_stable_argsort(values), np.argsort(values, kind="stable"))


def test_batches_are_those_of_the_rule_applied_example_by_example():
    rng = np.random.default_rng(11)
    for trial in range(80):
        if trial % 2:  # few lengths, long runs of each: full batches of one length, then spans
            lengths = rng.integers(1, int(rng.integers(2, 8)), int(rng.integers(0, 5000)))
            budget = int(rng.integers(1, 60))
        else:
            lengths = rng.integers(1, int(rng.integers(2, 400)), int(rng.integers(0, 3000)))
            budget = int(rng.integers(1, 2000))
        seed = None if trial % 3 == 0 else trial
        for drop_long in (True, False):
            assert make_batches(lengths, budget, seed, drop_long) == _batches_one_by_one(
                lengths, budget, seed, drop_long
            )


def test_input_already_waiting_is_read_in_groups_as_large_as_a_files_batching(tmp_path):
    """A regular file is always readable, as a pipe whose writer is ahead: groups of STREAM_GROUP
    lines, then the rest; every line once, in order, numbered for errors."""
    import os

    from transduce.data.corpus import STREAM_GROUP, stream_input

    lines = [f"line {i}" for i in range(2 * STREAM_GROUP + 5)]
    path = tmp_path / "in.txt"
    path.write_text("".join(f"{line}\n" for line in lines))
    fd = os.open(path, os.O_RDONLY)
    try:
        groups = list(stream_input(fd))
    finally:
        os.close(fd)
    assert [len(g) for g in groups] == [STREAM_GROUP, STREAM_GROUP, 5]
    assert [line for g in groups for line in g] == lines
