"""Multilingual datasets and models (issue 89): `prepare --pair` (one shared vocabulary, target-
language tags as pieces, each example's pair remembered), the pairs' mixing by temperature, and
decoding by target language (`--tgt-lang`, a tag in the line kept), each bad input one error line."""

from __future__ import annotations

import random

import numpy as np
import pytest
from typer.testing import CliRunner

import transduce
from transduce.cli import app
from transduce.data.dataset import Dataset
from transduce.data.languages import tag_for
from transduce.data.mixing import PairMixing
from transduce.decode.pipeline import encode_lines

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
PAIRS = {"de": str.upper, "fr": lambda line: " ".join(line.split()[::-1])}


def corpus(folder, sizes=(("train", 300), ("dev", 20), ("test", 10)), pairs=PAIRS):
    """Toy pairs: English words to upper case ('de') and to reversed order ('fr')."""
    rng = random.Random(0)
    for tgt, write in pairs.items():
        d = folder / f"en-{tgt}"
        d.mkdir(parents=True)
        for split, n in sizes:
            lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]
            (d / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
            (d / f"{split}.{tgt}").write_text("".join(f"{write(line)}\n" for line in lines))
    return folder


def prepare(*args):
    return CliRunner().invoke(app, ["prepare", *map(str, args)])


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory):
    """The toy corpus, its dataset, and a checkpoint trained on it for a few steps."""
    root = corpus(tmp_path_factory.mktemp("multi"))
    pairs = [f"--pair=en-{t}={root / f'en-{t}'}" for t in PAIRS]
    result = prepare(*pairs, "--vocab-size", "330", "-o", root / "data")
    assert result.exit_code == 0, result.output
    overrides = ["model.d_model=32", "model.d_ff=64", "model.heads=2", "model.encoder_layers=1"]
    overrides += [
        "model.decoder_layers=1",
        "train.steps=4",
        "train.validate_every=4",
        f"data.dataset={root / 'data'}",
    ]
    trained = CliRunner().invoke(
        app, ["train", "small", *overrides, "--run-dir", str(root / "run"), "--no-progress"]
    )
    assert trained.exit_code == 0, trained.output
    return root


def test_each_source_starts_with_its_pairs_tag_and_the_dataset_knows_each_examples_pair(multilingual):
    data = Dataset(multilingual / "data")
    assert [(p.src, p.tgt, p.tag) for p in data.meta.languages] == [
        ("en", "de", ">>deu<<"),
        ("en", "fr", ">>fra<<"),
    ]
    report = data.meta.report
    for name, split in data.splits.items():
        ids = np.asarray(data.pair_ids[name])
        assert ids.tolist() == sorted(ids.tolist())  # pair after pair
        assert np.bincount(ids).tolist() == [report[name]["en-de"]["pairs"], report[name]["en-fr"]["pairs"]]
        for i in range(len(split)):
            source, target = (s.tolist() for s in split.pair(i))
            pair = data.meta.languages[int(ids[i])]
            assert data.src_vocab.token(source[0]) == pair.tag
            words = data.src_vocab.decode(source[1:]).split()
            assert data.tgt_vocab.decode(target) == PAIRS[pair.tgt](" ".join(words))
    again = prepare(
        *(f"--pair=en-{t}={multilingual / f'en-{t}'}" for t in PAIRS),
        "--vocab-size",
        "330",
        "-o",
        multilingual / "data",
    )
    assert again.exit_code == 0 and "up to date" in again.output


BAD = [
    ("one pair", lambda r: [f"--pair=en-de={r / 'en-de'}"], "needs two --pair options or more"),
    (
        "a pair twice",
        lambda r: [f"--pair=en-de={r / 'en-de'}", f"--pair=en-de={r / 'en-fr'}"],
        "en-de is given twice",
    ),
    (
        "no folder",
        lambda r: [f"--pair=en-de={r / 'en-de'}", "--pair=en-fr=" + str(r / "nowhere")],
        "train.en: file not found",
    ),
    ("not SRC-TGT=DIR", lambda r: ["--pair=ende", f"--pair=en-fr={r / 'en-fr'}"], "give SRC-TGT=DIR"),
    ("a tag format without {lang}", lambda r: [*two(r), "--tag-format", ">>x<<"], "must hold {lang} once"),
    (
        "a tag that can be a word",
        lambda r: [*two(r), "--tag-format", "{lang}"],
        "could be a word of the text",
    ),
    ("a tag the corpus holds", lambda r: [*two(r), "--tag-format", "{lang}ish!"], ""),  # filled in below
    ("pairs and DATA_DIR", lambda r: [r / "en-de", *two(r)], "give DATA_DIR or --pair options, not both"),
    ("pairs with factors", lambda r: [*two(r), "--factors", "1"], "--pair takes plain text sources"),
    # issue 87's sweep (2026-12-04): each was accepted, the option ignored or the pair read twice
    (
        "pairs with --src and --tgt",
        lambda r: [*two(r), "--src", "en", "--tgt", "de"],
        "--src and --tgt name DATA_DIR's files; with --pair each pair names its languages",
    ),
    (
        "pairs with --task",
        lambda r: [*two(r), "--task", "copy"],
        "--pair applies to parallel text, not to --task",
    ),
    ("pairs with --separate-vocab", lambda r: [*two(r), "--separate-vocab"], "no --separate-vocab"),
    (
        "a pair of one language",
        lambda r: [f"--pair=en-en={r / 'en-de'}", f"--pair=en-fr={r / 'en-fr'}"],
        "the source and the target are one language",
    ),
    (
        "--tag-format without --pair",
        lambda r: [r / "en-de", "--src", "en", "--tgt", "de", "--tag-format", "__{lang}__"],
        "--tag-format goes with --pair",
    ),
]


def two(root):
    return [f"--pair=en-{t}={root / f'en-{t}'}" for t in PAIRS]


@pytest.mark.parametrize(("args", "message"), [(a, m) for _, a, m in BAD], ids=[n for n, _, _ in BAD])
def test_a_bad_multilingual_prepare_is_one_error_line(tmp_path, args, message):
    root = corpus(tmp_path)
    if "ish!" in " ".join(map(str, args(root))):  # a corpus that already holds its tags
        for split in ("train", "dev", "test"):
            path = root / "en-de" / f"{split}.en"
            path.write_text("".join(f"fraish! {line}\n" for line in path.read_text().splitlines()))
        message = "the tag fraish! occurs in the training text"
    result = prepare(*args(root), "--vocab-size", "330", "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and message in result.output.replace("\n", " ")
    assert not (tmp_path / "out").exists()


def test_the_target_language_puts_its_tag_first_and_a_tag_in_the_line_is_kept(multilingual):
    model = transduce.load(multilingual / "run")
    lines = ["the cat sat", ">>fra<< the dog", "", ">>deu<< a mat"]
    encoded = encode_lines(model, lines, tgt_lang="de")
    first = [model.src_vocab.token(s[0]) if s else None for s in encoded.sources]
    assert first == [">>deu<<", ">>fra<<", None, ">>deu<<"]
    plain = encode_lines(model, ["the cat sat", "the dog"], tgt_lang="fr")
    assert encoded.sources[1] == plain.sources[1]  # the typed tag is the same piece the option adds
    assert (
        encode_lines(model, ["the cat sat"], tgt_lang="fra").sources
        == encode_lines(model, [">>fra<< the cat sat"]).sources
    )


def test_decoding_and_scoring_by_target_language_equal_the_tagged_lines(multilingual):
    model = transduce.load(multilingual / "run")
    lines = ["the cat sat on a mat", "a dog ran", ""]
    for lang, tag in (("de", ">>deu<<"), ("fr", ">>fra<<")):
        tagged = [f"{tag} {line}" if line else line for line in lines]
        assert transduce.translate(model, lines, tgt_lang=lang, greedy=True) == transduce.translate(
            model, tagged, greedy=True
        )
        targets = ["THE CAT", "ran dog a", "x"]
        by_option = transduce.score(model, lines[:2], targets[:2], tgt_lang=lang)
        by_tag = transduce.score(model, tagged[:2], targets[:2])
        assert [s.log_prob for s in by_option] == pytest.approx([s.log_prob for s in by_tag])


TARGET_ERRORS = [
    (
        "an unknown language",
        ["--tgt-lang", "es"],
        "--tgt-lang es: the model translates into de (>>deu<<), fr (>>fra<<)",
    ),
    ("no language for a line without a tag", [], "input line 1: which language? give --tgt-lang"),
]


@pytest.mark.parametrize(
    ("args", "message"), [(a, m) for _, a, m in TARGET_ERRORS], ids=[n for n, _, _ in TARGET_ERRORS]
)
def test_a_target_language_the_model_cannot_use_is_one_error_line(multilingual, args, message):
    result = CliRunner().invoke(app, ["translate", str(multilingual / "run"), *args], input="the cat\n")
    assert result.exit_code == 2 and result.output.strip().splitlines()[-1].startswith(f"error: {message}")


def test_a_bilingual_model_refuses_a_target_language(tmp_path):
    from tiny import train_tiny

    run = train_tiny(tmp_path / "run", 2)
    result = CliRunner().invoke(app, ["translate", str(run), "--tgt-lang", "fr"], input="1 2\n")
    assert result.exit_code == 2 and "this model translates one language pair" in result.output


def test_mixing_gives_each_pair_its_share_by_temperature():
    pair_ids = np.repeat([0, 1, 2], [900, 90, 10])
    assert PairMixing(pair_ids, 1.0, seed=3).epoch(0).tolist() == list(range(1000))  # every example once
    for temperature in (2.0, 5.0, 100.0):
        mixing = PairMixing(pair_ids, temperature, seed=3)
        weights = np.array([900, 90, 10]) ** (1 / temperature)
        expected = np.maximum(np.rint(1000 * weights / weights.sum()), 1).astype(int)
        drawn = mixing.epoch(0)
        assert np.bincount(pair_ids[drawn], minlength=3).tolist() == expected.tolist()
        assert drawn.tolist() == PairMixing(pair_ids, temperature, seed=3).epoch(0).tolist()  # resumable
        assert drawn.tolist() != mixing.epoch(1).tolist()  # another epoch, another draw
    flat = PairMixing(pair_ids, 100.0, seed=3).quotas()
    assert max(flat) - min(flat) < 0.1 * max(flat)  # a high temperature evens the pairs out


def test_tags_follow_opus_mt_unless_another_form_is_named():
    assert tag_for("de") == ">>deu<<" and tag_for("fr") == ">>fra<<" and tag_for("xyz") == ">>xyz<<"
    assert tag_for("de", "__{lang}__") == "__deu__"


def test_the_sampler_batches_the_examples_an_epoch_draws():
    from transduce.data.batching import BatchSampler

    pair_ids = np.repeat([0, 1], [300, 30])
    lengths = np.random.default_rng(0).integers(3, 20, len(pair_ids))
    mixing = PairMixing(pair_ids, 5.0, seed=1)
    sampler = BatchSampler(lengths, 200, seed=1, draw=mixing.epoch)
    for epoch in (0, 1):
        batched = np.concatenate(sampler.epoch_batches(epoch))
        assert sorted(batched.tolist()) == sorted(mixing.epoch(epoch).tolist())
        assert all(lengths[b].max() * len(b) <= 200 for b in sampler.epoch_batches(epoch))


TINY_MODEL = [
    "model.d_model=32",
    "model.d_ff=64",
    "model.heads=2",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
]


def test_training_draws_each_epoch_by_the_pair_temperature(tmp_path):
    from transduce.config import load_config
    from transduce.train.build import Distributed, build_parts

    root = corpus(tmp_path / "corpus", sizes=(("train", 200), ("dev", 10), ("test", 5)))
    fr = root / "en-fr"
    for side in ("en", "fr"):  # an unbalanced pair: 20 examples against 200
        lines = (fr / f"train.{side}").read_text().splitlines(keepends=True)
        (fr / f"train.{side}").write_text("".join(lines[:20]))
    assert prepare(*two(root), "--vocab-size", "330", "-o", tmp_path / "data").exit_code == 0
    ids = Dataset(tmp_path / "data").pair_ids["train"]
    for temperature in (1.0, 5.0):
        overrides = [*TINY_MODEL, f"data.dataset={tmp_path / 'data'}", f"data.pair_temperature={temperature}"]
        sampler = build_parts(load_config("small", overrides), tmp_path / "run", Distributed()).sampler
        drawn = np.concatenate(sampler.epoch_batches(0))
        quotas = PairMixing(ids, temperature, seed=load_config("small", overrides).data.seed).quotas()
        assert np.bincount(ids[drawn], minlength=2).tolist() == quotas.tolist()
    assert quotas.tolist() != np.bincount(ids).tolist()  # T = 5 gave en-fr more than its 20


def test_validation_scores_each_pair_and_their_mean(multilingual):
    import sacrebleu

    from transduce.train.validation import text_metrics

    data = Dataset(multilingual / "data")
    ids, decode = data.pair_ids["dev"], data.tgt_vocab.decode

    def predict(split):  # en-de's references as they are, en-fr's cut to their first token
        refs = [split.pair(i)[1].tolist() for i in range(len(split))]
        return [r if ids[i] == 0 else r[:1] for i, r in enumerate(refs)], refs

    metrics = text_metrics(data, predict)
    refs = [decode(r) for r in predict(data.splits["dev"])[1]]
    fr_hyps = [decode(data.splits["dev"].pair(i)[1].tolist()[:1]) for i in np.flatnonzero(ids == 1)]
    fr_refs = [refs[i] for i in np.flatnonzero(ids == 1)]
    fr_bleu = sacrebleu.corpus_bleu(fr_hyps, [fr_refs]).score
    fr_chrf = sacrebleu.corpus_chrf(fr_hyps, [fr_refs]).score
    assert metrics["dev_bleu_en-de"] == pytest.approx(100.0) and metrics["dev_chrf_en-de"] == pytest.approx(
        100.0
    )
    assert metrics["dev_bleu_en-fr"] == pytest.approx(fr_bleu) and fr_bleu < 50
    assert metrics["dev_chrf_en-fr"] == pytest.approx(fr_chrf)
    assert metrics["dev_bleu"] == pytest.approx((100.0 + fr_bleu) / 2)
    assert metrics["dev_chrf"] == pytest.approx((100.0 + fr_chrf) / 2)


def test_the_best_checkpoint_follows_the_pair_the_user_names(multilingual, tmp_path):
    import json

    from transduce.config import load_config
    from transduce.train.trainer import Trainer

    overrides = [
        *TINY_MODEL,
        "train.steps=8",
        "train.validate_every=2",
        f"data.dataset={multilingual / 'data'}",
    ]
    cfg = load_config("small", [*overrides, "train.best_metric=chrf", "train.best_pair=en-fr"])
    trainer = Trainer(cfg, tmp_path / "run", show_progress=False)
    assert trainer.cadence.best_metric == "chrf_en-fr"
    trainer.fit()
    history = trainer.state.history
    assert len(history) == 4 and all(
        {"dev_chrf_en-de", "dev_chrf_en-fr", "dev_chrf"} <= set(h) for h in history
    )
    best = max(history, key=lambda h: (h["dev_chrf_en-fr"], -h["step"]))  # the first of equals
    assert json.loads((tmp_path / "run" / "best.json").read_text())["step"] == best["step"]
    assert trainer.state.best_value == best["dev_chrf_en-fr"]


BAD_BEST_PAIR = [
    ("best_pair with loss", ["train.best_pair=en-de"], "set train.best_metric=bleu or chrf"),
    ("a pair the data lacks", ["train.best_metric=bleu", "train.best_pair=en-es"], "allowed: en-de, en-fr"),
    ("not SRC-TGT", ["train.best_metric=bleu", "train.best_pair=ende"], "train.best_pair"),
]


@pytest.mark.parametrize(
    ("extra", "message"), [(e, m) for _, e, m in BAD_BEST_PAIR], ids=[n for n, _, _ in BAD_BEST_PAIR]
)
def test_a_best_pair_that_cannot_be_used_is_one_error_line(multilingual, tmp_path, extra, message):
    overrides = [*TINY_MODEL, "train.steps=2", f"data.dataset={multilingual / 'data'}", *extra]
    result = CliRunner().invoke(
        app, ["train", "small", *overrides, "--run-dir", str(tmp_path / "run"), "--no-progress"]
    )
    assert result.exit_code == 2 and message in result.output
    assert result.output.count("error:") == 1 and "Traceback" not in result.output


ONE_PAIR = [  # a multilingual setting on a dataset of one pair: what the error says
    ("best_pair", ["train.best_metric=bleu", "train.best_pair=en-de"], "needs a dataset of several pairs"),
    # issue 87's sweep (2026-12-04): drew nothing, and was accepted
    (
        "pair_temperature",
        ["data.pair_temperature=5"],
        "data.pair_temperature=5 draws the pairs of a multilingual dataset",
    ),
]


@pytest.mark.parametrize(("extra", "message"), [r[1:] for r in ONE_PAIR], ids=[r[0] for r in ONE_PAIR])
def test_a_multilingual_setting_on_a_bilingual_dataset_is_one_error_line(
    multilingual, tmp_path, extra, message
):
    data = tmp_path / "data"
    assert (
        prepare(
            multilingual / "en-de", "--src", "en", "--tgt", "de", "--vocab-size", "300", "-o", data
        ).exit_code
        == 0
    )
    overrides = [*TINY_MODEL, "train.steps=2", f"data.dataset={data}", *extra]
    result = CliRunner().invoke(
        app, ["train", "small", *overrides, "--run-dir", str(tmp_path / "run"), "--no-progress"]
    )
    assert result.exit_code == 2 and message in result.output
    assert result.output.count("error:") == 1 and "Traceback" not in result.output
