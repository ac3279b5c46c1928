"""BLEU/chrF through sacrebleu, the paper's BLEU definition by hand, accuracy, translate I/O."""

import math

import sacrebleu
from tiny_models import SIZES
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.data.vocab import SymbolVocab
from transduce.metrics import accuracy, corpus_scores
from transduce.model import build_model
from transduce.store.checkpoint import save_checkpoint, state_tensors
from transduce.store.meta import CheckpointMeta


def test_bleu_equals_sacrebleu_corpus_bleu():
    hyps = ["the cat sat on the mat", "a quick brown fox", "hello there world"]
    refs = ["the cat is on the mat", "the quick brown fox jumps", "hello world"]
    report = corpus_scores(hyps, refs)
    assert report.bleu == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert report.chrf == sacrebleu.corpus_chrf(hyps, [refs]).score
    assert report.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_paper_bleu_definition_by_hand():
    # p1..p4 = 5/6, 4/5, 3/4, 2/3; brevity penalty exp(1 - 7/6).
    expected = math.exp(1 - 7 / 6) * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25 * 100
    assert math.isclose(corpus_scores(["a b c d e f"], ["a b c d e g h"]).bleu, expected, rel_tol=1e-9)
    clipped = sacrebleu.metrics.BLEU().corpus_score(
        ["the the the the the the the"], [["the cat is on the mat"]]
    )
    assert math.isclose(clipped.precisions[0], 2 / 7 * 100, rel_tol=1e-9)  # clipped unigram precision


def test_accuracy_counts_positions_and_exact_matches():
    acc = accuracy([[1, 2, 3], [4, 5], [7]], [[1, 2, 3], [4, 6, 6], [7]])
    assert math.isclose(acc.sequence, 2 / 3)
    assert math.isclose(acc.char, (3 + 1 + 1) / (3 + 3 + 1))


def random_checkpoint(path):
    vocab = SymbolVocab([str(i) for i in range(10)])
    cfg = load_config("small", [*SIZES, "model.decoder_layers=1", "decode.beam=2", "decode.max_len_b=3"])
    model = build_model(cfg.model, len(vocab), len(vocab))
    vocab_dir = path.parent / "vocab"
    vocab_dir.mkdir()
    vocab.save(vocab_dir / "src")
    save_checkpoint(
        path,
        state_tensors(model),
        cfg,
        CheckpointMeta(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab)),
        [vocab_dir / "src.symbols.json"],
    )
    return path


def test_translate_keeps_line_count_and_order_with_empty_and_long_lines(tmp_path):
    ckpt = random_checkpoint(tmp_path / "ckpt")
    lines = ["1 2 3", "", "4 5", "   ", " ".join(["7"] * 3000), "9", ""]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        app,
        [
            "translate",
            str(ckpt),
            "-i",
            str(tmp_path / "in.txt"),
            "-o",
            str(tmp_path / "out.txt"),
            "--max-src-len",
            "100",
        ],
    )
    assert result.exit_code == 0, result.output
    out = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    assert len(out) == len(lines)
    assert out[1] == "" and out[3] == "" and out[6] == ""
    single = CliRunner().invoke(app, ["translate", str(ckpt), "--greedy"], input="4 5\n")
    greedy_lines = CliRunner().invoke(app, ["translate", str(ckpt), "--greedy"], input="1 2 3\n\n4 5\n")
    assert greedy_lines.stdout.split("\n")[2] == single.stdout.split("\n")[0]


def test_translate_rejects_invalid_utf8_and_bad_checkpoint(tmp_path):
    ckpt = random_checkpoint(tmp_path / "ckpt")
    (tmp_path / "bad.txt").write_bytes(b"1 2\n\xff\n")
    result = CliRunner().invoke(app, ["translate", str(ckpt), "-i", str(tmp_path / "bad.txt")])
    assert result.exit_code == 2 and "bad.txt:2: invalid UTF-8" in result.output
    missing = CliRunner().invoke(app, ["translate", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "neither a checkpoint nor a run directory" in missing.output


def test_evaluate_writes_the_translations_it_scores(tmp_path):
    """evaluate -o keeps the translations: the lines translate writes with the same search, and
    scored as evaluate --hyp scores that file."""
    from tiny_models import DIGITS, saved_checkpoint

    saved_checkpoint(tmp_path / "ck", DIGITS, seed=4)
    (tmp_path / "src").write_text("1 2 3\n\n4 5 6 7\n8\n")
    (tmp_path / "ref").write_text("3 2 1\n\n7 6 5 4\n8\n")
    ck, src, ref, out = (str(tmp_path / name) for name in ("ck", "src", "ref", "out"))
    evaluated = CliRunner().invoke(
        app, ["evaluate", ck, "--src", src, "--ref", ref, "-o", out, "--beam", "2"]
    )
    assert evaluated.exit_code == 0, evaluated.output
    translated = CliRunner().invoke(app, ["translate", ck, "-i", src, "--beam", "2"])
    assert (tmp_path / "out").read_text() == translated.stdout and translated.stdout.count("\n") == 4
    rescored = CliRunner().invoke(app, ["evaluate", "--hyp", out, "--ref", ref])
    bleu = [line for line in evaluated.stdout.splitlines() if line.startswith("BLEU")]
    assert bleu and bleu == [line for line in rescored.stdout.splitlines() if line.startswith("BLEU")]
