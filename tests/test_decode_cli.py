"""The decoding toolbox on the command line: `translate` with sampling, ensembles, forced
prefixes and streaming stdin, and `score`, checked against independent computations."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_models import DIGITS, saved_checkpoint, sequence_log_probs
from typer.testing import CliRunner

from transduce.cli import app
from transduce.data.vocab import EOS

pytestmark = pytest.mark.usefixtures("single_thread")

LINES = ["1 2 3", "", "4 5", "6 7 8 9 1", "2"]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cli")
    for name, symbols, seed in (("a", DIGITS, 1), ("b", DIGITS, 2), ("letters", list("abcdefghij"), 3)):
        saved_checkpoint(tmp / name, symbols, seed)
    (tmp / "in.txt").write_text("".join(line + "\n" for line in LINES))
    return {"a": tmp / "a", "b": tmp / "b", "letters": tmp / "letters", "in": tmp / "in.txt"}


def translate(*args: object) -> list[str]:
    result = CliRunner().invoke(app, ["translate", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def nbest_rows(rows: list[str]) -> dict[int, list[tuple[str, float]]]:
    found: dict[int, list[tuple[str, float]]] = {}
    for row in rows:
        number, text, score = row.split(" ||| ")
        found.setdefault(int(number), []).append((text, float(score)))
    return found


def score_rows(ckpts: dict[str, Path], targets: Path) -> list[str]:
    """`score --per-token` of the input lines against `targets` with checkpoint a."""
    args = ["score", str(ckpts["a"]), "--src", str(ckpts["in"]), "--tgt", str(targets), "--per-token"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def per_token(column: str) -> tuple[list[str], list[float]]:
    """The tokens and log-probabilities of score's --per-token column (TOKEN=LOGPROB pairs)."""
    pairs = [pair.rsplit("=", 1) for pair in column.split(" ")]
    return [token for token, _ in pairs], [float(value) for _, value in pairs]


def test_sampling_with_top_k_1_prints_the_greedy_output(ckpts):
    greedy = translate(ckpts["a"], "-i", ckpts["in"], "--greedy")
    assert translate(ckpts["a"], "-i", ckpts["in"], "--sample", "--top-k", "1") == greedy
    assert len(greedy) == len(LINES) and greedy[1] == ""


def test_samples_are_reproducible_with_a_seed_and_printed_as_rows(ckpts):
    args = (ckpts["a"], "-i", ckpts["in"], "--sample", "--num-samples", "4", "--temperature", "2")
    first = translate(*args, "--seed", "7")
    assert first == translate(*args, "--seed", "7")
    assert first != translate(*args, "--seed", "8")
    rows = nbest_rows(first)
    assert sorted(rows) == list(range(len(LINES)))
    assert [len(rows[n]) for n in rows] == [4, 1, 4, 4, 4]  # the empty line keeps one empty row
    assert len({text for text, _ in rows[3]}) > 1  # temperature 2 on a random model: varied


def test_an_ensemble_of_a_checkpoint_with_itself_translates_as_it_does(ckpts):
    alone = translate(ckpts["a"], "-i", ckpts["in"], "--nbest", "2")
    assert translate(ckpts["a"], ckpts["a"], "-i", ckpts["in"], "--nbest", "2") == alone
    assert translate(ckpts["a"], ckpts["b"], "-i", ckpts["in"], "--nbest", "2") != alone


def test_forced_prefixes_start_every_output(ckpts, tmp_path):
    prefixes = ["7 7", "", "", "0", "9 8 7"]
    (tmp_path / "prefix.txt").write_text("\n".join(prefixes) + "\n")
    rows = nbest_rows(
        translate(ckpts["a"], "-i", ckpts["in"], "--prefix", tmp_path / "prefix.txt", "--nbest", "3")
    )
    for number, prefix in enumerate(prefixes):
        for text, _ in rows[number]:
            assert text.split()[: len(prefix.split())] == prefix.split()


def test_score_prints_the_models_log_probabilities(ckpts, tmp_path):
    from transduce.store.load import load_model

    loaded = load_model(ckpts["a"])
    targets = ["3 2 1", "4", "", "9 9 9 9", "1 1"]
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n")
    rows = score_rows(ckpts, tmp_path / "tgt.txt")
    assert len(rows) == len(LINES)
    for source, target, row in zip(LINES, targets, rows, strict=True):
        total, mean, tokens = row.split("\t")
        seq = [*loaded.tgt_vocab.encode(target), EOS]
        expected = sequence_log_probs(loaded.model, [*loaded.src_vocab.encode(source), EOS], seq)
        assert float(total) == pytest.approx(sum(expected), abs=1e-3)
        assert float(mean) == pytest.approx(sum(expected) / len(seq), abs=1e-3)
        names, values = per_token(tokens)
        assert values == pytest.approx(expected, abs=1e-3)
        assert names == [*target.split(), "</s>"]


def test_the_best_beam_output_scores_its_search_score(ckpts, tmp_path):
    rows = nbest_rows(translate(ckpts["a"], "-i", ckpts["in"], "--alpha", "0", "--nbest", "2", "--beam", "3"))
    best = [rows[n][0] for n in range(len(LINES))]
    (tmp_path / "best.txt").write_text("".join(text + "\n" for text, _ in best))
    for source, (text, search_score), row in zip(
        LINES, best, score_rows(ckpts, tmp_path / "best.txt"), strict=True
    ):
        if not source:
            continue
        _, tokens = per_token(row.split("\t")[2])
        cut = len(text.split()) == len(source.split()) + 6  # stopped by the length limit, not by EOS
        assert sum(tokens[:-1] if cut else tokens) == pytest.approx(search_score, abs=1e-3)


def test_stdin_lines_are_answered_as_they_arrive_and_sample_as_from_a_file(ckpts):
    args = ["translate", str(ckpts["a"]), "--sample", "--seed", "5", "--num-samples", "2"]
    command = [sys.executable, "-m", "transduce", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        streamed = []
        for line in LINES:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            began = time.monotonic()
            streamed += [proc.stdout.readline().rstrip("\n") for _ in range(2 if line else 1)]
            assert time.monotonic() - began < 60  # answered while stdin is still open
        proc.stdin.close()
        assert proc.stdout.read() == ""
        assert proc.wait(timeout=60) == 0
    assert streamed == translate(*args[1:], "-i", ckpts["in"])


BAD = [
    ("top-p above 1", ["--sample", "--top-p", "1.5"], "--top-p"),
    ("temperature 0", ["--sample", "--temperature", "0"], "--temperature"),
    ("greedy and sample", ["--sample", "--greedy"], "exclude each other"),
    (
        "greedy with a beam",
        ["--greedy", "--beam", "4"],
        "--beam applies to beam search, not to greedy search (--greedy)",
    ),
    ("greedy with nbest", ["--greedy", "--nbest", "2"], "for several outputs per input use beam search"),
    ("min-len above the limit", ["--min-len", "60"], "--min-len (60) is above input 1's output length limit"),
    ("nbest above beam", ["--nbest", "5", "--beam", "2"], "must not exceed"),
    ("too few prefixes", ["--prefix", "{one_line}"], "prefix lines"),
    ("prefix too long", ["--prefix", "{long_prefixes}"], "more than the maximum output length"),
    ("vocabularies differ", ["{letters}"], "vocabularies differ"),
]


@pytest.mark.parametrize(("args", "fragment"), [(a, f) for _, a, f in BAD], ids=[n for n, _, _ in BAD])
def test_bad_decoding_options_give_one_error_line(ckpts, tmp_path, args, fragment):
    (tmp_path / "one.txt").write_text("1\n")
    (tmp_path / "long.txt").write_text("".join(" ".join(["1"] * 40) + "\n" for _ in LINES))
    names = {
        "one_line": tmp_path / "one.txt",
        "long_prefixes": tmp_path / "long.txt",
        "letters": ckpts["letters"],
    }
    args = [a.format(**names) for a in args]
    before = ckpts["in"].read_bytes()
    result = CliRunner().invoke(app, ["translate", str(ckpts["a"]), "-i", str(ckpts["in"]), *args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and fragment in errors[0], result.stderr
    assert ckpts["in"].read_bytes() == before


def test_score_refuses_files_of_different_lengths(ckpts, tmp_path):
    (tmp_path / "tgt.txt").write_text("1\n2\n")
    result = CliRunner().invoke(
        app, ["score", str(ckpts["a"]), "--src", str(ckpts["in"]), "--tgt", str(tmp_path / "tgt.txt")]
    )
    assert result.exit_code == 2
    assert "error:" in result.stderr and "one target per source" in result.stderr
    assert result.stdout == ""
