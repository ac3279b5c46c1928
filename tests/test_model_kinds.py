"""Encoder-only classifiers and decoder-only language models, end to end: their generated tasks,
training to clearly better than chance, decoding (checked against step-by-step loops and hand
computations), the command line, and one-line errors for what does not fit."""

import math
from pathlib import Path

import pytest
import torch
from tiny import TINY
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import DecodeConfig, load_config
from transduce.data.tasks import generate_split
from transduce.data.vocab import BOS, EOS, FIRST_SYMBOL, PAD
from transduce.decode.scoring import score_all
from transduce.decode.torch_engine import decode_all
from transduce.model import build_model
from transduce.train.trainer import Trainer

SIZES = [t for t in TINY if not t.startswith("data.task=")]
KINDS = {
    "majority": ["model.kind=encoder", "model.num_classes=3", "data.task=majority"],
    "updown": ["model.kind=encoder", "model.classifier=token", "model.num_classes=4", "data.task=updown"],
    # Reading the prompt back needs two layers and more steps than the classifiers.
    "repeat": [
        "model.kind=decoder",
        "model.decoder_layers=2",
        "model.dropout=0",
        "model.positions=learned",
        "model.max_positions=64",
        "data.task=repeat",
        "data.task_train_size=3000",
        "train.warmup=200",
        "train.lr_scale=1",
    ],
}
STEPS = {"majority": 200, "updown": 200, "repeat": 600}


def _config(task: str, *extra: str):
    steps = STEPS[task]
    return load_config(
        "small",
        [
            *SIZES,
            *KINDS[task],
            f"train.steps={steps}",
            f"train.validate_every={steps}",
            f"train.save_every={steps}",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Each task's model trained once (with one thread), by task: (run directory, final metrics)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = {}
    try:
        for task in KINDS:
            torch.manual_seed(0)
            run = tmp_path_factory.mktemp(task)
            runs[task] = (run, Trainer(_config(task), run, show_progress=False).fit())
    finally:
        torch.set_num_threads(before)
    return runs


def _cli(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


# ------------------------------------------------------------------ data


def test_generated_tasks_label_and_continue_correctly():
    cfg = load_config("small", ["data.task_train_max_len=6", "data.task_eval_size=200"]).data
    for src, label in generate_split(cfg.model_copy(update={"task": "majority"}), "dev"):
        digits = [int(s) for s in src.split()]
        high = sum(d >= 5 for d in digits)
        assert label == (
            "high" if high > len(digits) - high else "low" if high < len(digits) - high else "tie"
        )
    for src, labels in generate_split(cfg.model_copy(update={"task": "updown"}), "dev"):
        digits, tags = [int(s) for s in src.split()], labels.split()
        assert len(tags) == len(digits) and tags[0] == "first"
        for a, b, tag in zip(digits, digits[1:], tags[1:], strict=False):
            assert tag == ("up" if b > a else "down" if b < a else "same")
    for prompt, continuation in generate_split(cfg.model_copy(update={"task": "repeat"}), "test_long"):
        assert prompt == f"{continuation} |" and 6 < len(continuation.split()) <= 12


def test_language_model_batches_join_source_and_target(tmp_path):
    from transduce.data.batching import collate, padded_lengths
    from transduce.data.dataset import prepare_task

    cfg = load_config("small", ["data.task=repeat", "data.task_train_size=10", "data.task_eval_size=4"])
    split = prepare_task(cfg.data, tmp_path / "d").splits["dev"]
    batch = collate(split, [0, 1, 2], joined=True)
    for row in range(3):
        seq = [*split.pair(row)[0].tolist(), *split.pair(row)[1].tolist()]
        assert batch.tgt_in[row, : len(seq) + 1].tolist() == [BOS, *seq]
        assert batch.tgt_out[row, : len(seq) + 1].tolist() == [*seq, EOS]
        assert batch.tgt_out[row, len(seq) + 1 :].eq(PAD).all()
        assert padded_lengths(split, joined=True)[row] == len(seq) + 1


# ------------------------------------------------------------ training


@pytest.mark.parametrize(
    ("task", "metric", "floor"), [("majority", "dev_acc", 0.75), ("updown", "dev_acc", 0.85)]
)
def test_classifiers_learn_their_task(trained, task, metric, floor):
    """Chance is below 0.5 for both (the most frequent label of majority, `up` after `first`)."""
    _, metrics = trained[task]
    assert metrics[metric] >= floor, metrics


def test_language_model_learns_to_continue_its_prompt(trained):
    """Continuations of `s |` are `s`: a character accuracy of 0.1 would be chance."""
    _, metrics = trained["repeat"]
    assert metrics["dev_char_acc"] >= 0.6 and metrics["dev_seq_acc"] >= 0.3, metrics
    assert math.isfinite(metrics["dev_ppl"]) and metrics["dev_ppl"] < 10


def test_best_metric_acc_picks_the_best_classifier(tmp_path, single_thread):
    cfg = _config("majority", "train.steps=40", "train.validate_every=20", "train.best_metric=acc")
    trainer = Trainer(cfg, tmp_path, show_progress=False)
    trainer.fit()
    accuracies = {row["step"]: row["dev_acc"] for row in trainer.state.history}
    assert trainer.state.best_value == max(accuracies.values())
    assert accuracies[trainer.state.best_step] == trainer.state.best_value


# ------------------------------------------------------------ decoding


def _tiny_lm(seed: int = 0):
    torch.manual_seed(seed)
    cfg = load_config("small", [*SIZES, "model.kind=decoder", "model.dropout=0"]).model
    model = build_model(cfg, 12, 12).eval()
    with torch.no_grad():
        model.output.weight.mul_(4.0)  # varied next-token distributions
    return model


@torch.no_grad()
def _naive_continuation(model, prompt: list[int], limit: int) -> tuple[list[int], float]:
    """Argmax one token at a time over the whole sequence, no cache, no batch; the output (prompt
    included) stops at EOS or at `limit` tokens. Returns the continuation and log P(sequence)."""
    seq, log_prob = list(prompt), 0.0
    for i, t in enumerate(prompt):
        log_prob += float(model(torch.tensor([[BOS, *prompt[:i]]])).logits[0, -1].log_softmax(-1)[t])
    while len(seq) < limit:
        logp = model(torch.tensor([[BOS, *seq]])).logits[0, -1].log_softmax(-1)
        logp[PAD] = logp[BOS] = -math.inf
        token = int(logp.argmax())
        log_prob += float(logp[token])
        if token == EOS:
            break
        seq.append(token)
    return seq[len(prompt) :], log_prob


def test_language_model_greedy_continuation_equals_a_naive_loop():
    model = _tiny_lm()
    prompts = [[5, 6, 7], [4], [], [8, 9, 10, 11, 4, 5], [7, 7]]
    options = DecodeConfig(
        search="greedy", max_len_b=6, max_tokens=12
    )  # several batches, prompts of every length
    found = decode_all(model, prompts, options)
    for prompt, hyps in zip(prompts, found, strict=True):
        if not prompt:
            assert hyps == []  # an empty line stays empty
            continue
        continuation, log_prob = _naive_continuation(model, prompt, len(prompt) + 6)
        assert hyps[0].tokens == continuation
        assert hyps[0].log_prob == pytest.approx(log_prob, abs=1e-4)  # the prompt is scored too


def test_language_model_beam_and_sampling_continue_the_prompt():
    """Beam search and sampling continue the prompt too (at most max_len_b tokens past it), and
    score it with the continuation as `score_all` does."""
    model = _tiny_lm(1)
    prompts = [[5, 6, 7], [4, 9]]
    beam = decode_all(model, prompts, DecodeConfig(beam=3, nbest=3, alpha=0.0, max_len_b=5))
    sampled = DecodeConfig(sample=True, seed=3, num_samples=4, max_len_b=5)
    together = decode_all(model, prompts, sampled)
    alone = decode_all(model, prompts[:1], sampled) + decode_all(model, prompts[1:], sampled, numbers=[1])
    assert [[h.tokens for h in s] for s in together] == [[h.tokens for h in s] for s in alone]
    for prompt, found in zip(prompts * 2, beam + together, strict=True):
        assert len(found) in (3, 4)
        for hyp in found:
            assert len(hyp.tokens) <= 5
            if len(hyp.tokens) < 5:  # ended in EOS: scoring gives the search's log-probability
                assert score_all(model, [prompt], [hyp.tokens])[0].log_prob == pytest.approx(
                    hyp.log_prob, abs=1e-4
                )


def _layer_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)


def _sinusoid(position: int, d: int) -> torch.Tensor:
    """The paper's PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    pe = torch.empty(d)
    for i in range(0, d, 2):
        pe[i] = math.sin(position / 10000 ** (i / d))
        pe[i + 1] = math.cos(position / 10000 ** (i / d))
    return pe


@pytest.mark.parametrize("classifier", ["sequence", "token"])
def test_classifier_logits_equal_a_hand_computation(classifier):
    """With every sub-layer's output projection zeroed, a pre-norm encoder's states are the final
    LayerNorm of the embeddings, so the logits follow from the embedding table, the sinusoids and
    the head: the mean over a sequence's real positions (EOS included), or each position alone."""
    torch.manual_seed(0)
    cfg = load_config(
        "small",
        [
            *SIZES,
            "model.kind=encoder",
            "model.num_classes=3",
            f"model.classifier={classifier}",
            "model.norm=pre",
        ],
    ).model
    model = build_model(cfg, 12, 12).eval()
    with torch.no_grad():
        for layer in model.encoder.layers:
            for linear in (layer.self_attn.out_proj, layer.ffn.w2):
                linear.weight.zero_()
                linear.bias.zero_()
    rows = [[5, 6, 7, EOS], [8, EOS, PAD, PAD]]
    logits = model.classify(torch.tensor(rows))
    d, table = cfg.d_model, model.embed.tokens.weight.detach()
    head_w, head_b = model.head.weight.detach(), model.head.bias.detach()
    for row, ids in enumerate(rows):
        real = [t for t in ids if t != PAD]
        states = [_layer_norm(math.sqrt(d) * table[t] + _sinusoid(pos, d)) for pos, t in enumerate(real)]
        if classifier == "sequence":
            expected = head_w @ torch.stack(states).mean(0) + head_b
            assert torch.allclose(logits[row], expected, atol=1e-4)
        else:
            for pos, state in enumerate(states):
                assert torch.allclose(logits[row, pos], head_w @ state + head_b, atol=1e-4)


def test_classifier_decodes_labels_one_per_sequence_or_token(trained):
    from transduce.store.load import load_model

    for task, per_token in (("majority", False), ("updown", True)):
        loaded = load_model(trained[task][0])
        sources = [[5, 6], [7, 8, 9, 4], []]
        found = decode_all(loaded.model, sources, DecodeConfig(beam=3, nbest=2))
        for src, hyps in zip(sources, found, strict=True):
            if not src:
                assert hyps == []
                continue
            (hyp,) = hyps
            assert len(hyp.tokens) == (len(src) if per_token else 1)
            assert all(FIRST_SYMBOL <= t < len(loaded.tgt_vocab) for t in hyp.tokens)
            score = score_all(loaded.model, [src], [hyp.tokens])[0]
            assert score.log_prob == pytest.approx(hyp.log_prob, abs=1e-5) and score.count == len(hyp.tokens)


# ------------------------------------------------------------ command line


def test_cli_translate_and_evaluate_each_kind(trained, tmp_path):
    lines = "1 2 3\n7 8 9 9\n\n4\n"
    for task, check in (
        ("majority", lambda src, out: out in ("low", "high", "tie")),
        ("updown", lambda src, out: len(out.split()) == len(src.split()) and out.split()[0] == "first"),
    ):
        result = _cli("translate", str(trained[task][0]), stdin=lines)
        assert result.exit_code == 0, result.output
        outputs = result.stdout.splitlines()
        assert len(outputs) == 4 and outputs[2] == ""
        assert all(check(s, o) for s, o in zip(lines.splitlines(), outputs, strict=True) if s)
        result = _cli("evaluate", str(trained[task][0]), "--split", "test")
        assert result.exit_code == 0 and "test: label accuracy" in result.stdout, result.output
    result = _cli("translate", str(trained["repeat"][0]), "--greedy", stdin="1 2 3 |\n\n5 |\n")
    assert result.exit_code == 0, result.output
    continued = result.stdout.splitlines()
    assert (
        len(continued) == 3
        and continued[1] == ""
        and all(set(c.split()) <= set("0123456789|") for c in continued)
    )
    result = _cli(
        "translate", str(trained["repeat"][0]), "--sample", "--num-samples", "2", "--seed", "1", stdin="4 |\n"
    )
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 2, result.output
    result = _cli("evaluate", str(trained["repeat"][0]), "--split", "dev", "--greedy")
    assert result.exit_code == 0 and "dev: char accuracy" in result.stdout and "perplexity" in result.stdout


def test_cli_evaluates_a_classifier_on_a_file_of_labels(trained, tmp_path):
    src, ref = tmp_path / "in.txt", tmp_path / "labels.txt"
    src.write_text("1 2\n8 9 7\n\n")
    ref.write_text("low\nhigh\n\n")
    result = _cli("evaluate", str(trained["majority"][0]), "--src", str(src), "--ref", str(ref))
    assert result.exit_code == 0, result.output
    assert f"{src}: label accuracy" in result.stdout and "(2 examples)" in result.stdout


# ------------------------------------------------------------ bad input


def _train(tmp: Path, *overrides: str) -> list[str]:
    return ["train", "small", *SIZES, *overrides, "--run-dir", str(tmp / "run"), "--no-progress"]


BAD = [
    (
        "encoder without num_classes",
        lambda r, t: _train(t, "model.kind=encoder", "data.task=majority"),
        "needs model.num_classes",
    ),
    (
        "language model without layers",
        lambda r, t: _train(t, "model.kind=decoder", "model.decoder_layers=0", "data.task=repeat"),
        "model.kind='decoder' needs model.decoder_layers >= 1",
    ),
    (
        "classifier on a seq2seq task",
        lambda r, t: _train(t, "model.kind=encoder", "model.num_classes=3", "data.task=copy"),
        "it needs labelled data",
    ),
    (
        "num_classes unlike the labels",
        lambda r, t: _train(t, "model.kind=encoder", "model.num_classes=2", "data.task=majority"),
        "set model.num_classes=3",
    ),
    (
        "a token classifier on sequence labels",
        lambda r, t: _train(
            t, "model.kind=encoder", "model.num_classes=3", "model.classifier=token", "data.task=majority"
        ),
        "set model.classifier=sequence",
    ),
    (
        "a language model on separate vocabularies",
        lambda r, t: _train(t, "model.kind=decoder", "data.task=majority"),
        "has separate source and target vocabularies",
    ),
    (
        "best_metric acc on a seq2seq task",
        lambda r, t: _train(t, "data.task=copy", "train.best_metric=acc"),
        "train.best_metric='acc' is not computed on task data",
    ),
    (
        "syntax masks on a language model",
        lambda r, t: _train(t, "model.kind=decoder", "model.syntax_mask=hard", "data.task=repeat"),
        "needs model.kind='encoder_decoder'",
    ),
    (
        "sampling a classifier",
        lambda r, t: ["translate", str(r["majority"][0]), "--sample"],
        "sampling does not apply",
    ),
    (
        "forced prefixes for a classifier",
        lambda r, t: ["translate", str(r["majority"][0]), "--prefix", _lines(t, "p", "low")],
        "forced prefixes do not apply to a classifier",
    ),
    (
        "unknown labels",
        lambda r, t: [
            "evaluate",
            str(r["majority"][0]),
            "--src",
            _lines(t, "s", "1 2"),
            "--ref",
            _lines(t, "l", "hgh"),
        ],
        "labels line 1: a label the model does not know; its labels: low, high, tie",
    ),
    (
        "too few token labels",
        lambda r, t: [
            "evaluate",
            str(r["updown"][0]),
            "--src",
            _lines(t, "s", "1 2"),
            "--ref",
            _lines(t, "l", "first"),
        ],
        "labels line 1: 1 labels for 2 source tokens",
    ),
    (
        "attention plots of a language model",
        lambda r, t: ["attention", str(r["repeat"][0]), "1 2 |", "-o", str(t / "plots")],
        "attention plots need an encoder-decoder model",
    ),
]


def _lines(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text + "\n")
    return str(path)


@pytest.mark.parametrize(("build", "fragment"), [(b, f) for _, b, f in BAD], ids=[r[0] for r in BAD])
def test_bad_input_is_one_error_line_and_status_2(trained, tmp_path, build, fragment):
    result = CliRunner().invoke(app, build(trained, tmp_path), input="1 2\n")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert fragment in result.output.replace("\n", " "), result.output
    assert "Traceback" not in result.output
