"""`--engine ctranslate2`: CTranslate2 decodes behind our commands, pipeline and server.

The fixture: a tiny sentencepiece model (words -> upper case) trained for 120 updates, and 60
sentences of 1 to 12 words drawn from its words. So few updates leave it weak on purpose: many of
its outputs run on until their length limit, which is what the per-sentence limits are tested on.
At 60 updates (with fused Adam on the CPU) one sentence ends the empty output first, and there the
engines' beams part (docs/decoding.md, "Where they can differ"): after that ending
CTranslate2's later n-best entries, and under a short limit its best, differ from ours.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys

import httpx
import pytest
import torch
from serving import Server, browser_page
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.data.batching import encode_sources
from transduce.data.vocab import BOS, EOS, PAD
from transduce.decode.engine import Request
from transduce.decode.options import decode_options
from transduce.decode.pipeline import score_lines, translate_lines
from transduce.decode.search import length_penalty
from transduce.decode.torch_engine import TorchEngine
from transduce.store.load import load_model

ctranslate2 = pytest.importorskip("ctranslate2", reason="the ctranslate2 package is not installed")

from transduce.decode.ctranslate2_engine import (  # noqa: E402  (needs the package)
    EngineError,
    cache_folder,
    open_ctranslate2,
)


def greedily(options):
    """`options` with greedy search."""
    return options.model_copy(update={"search": "greedy"})


WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The corpus directory with the trained run in run/, and the fixture's sentences."""
    from transduce.data.prepare import PrepareOptions, prepare_text
    from transduce.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("ct2engine")
    rng = random.Random(0)
    for split, size in (("train", 300), ("dev", 10)):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7))) for _ in range(size)]
        (tmp / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
        (tmp / f"{split}.up").write_text("".join(f"{line.upper()}\n" for line in lines))
    prepare_text(tmp, tmp / "data", PrepareOptions("en", "up", vocab_size=300), show_progress=False)
    overrides = [
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        "model.encoder_layers=2",
        "model.decoder_layers=2",
        f"data.dataset={tmp / 'data'}",
        "data.max_tokens=400",
        "train.steps=120",
        "train.warmup=20",
        "train.save_every=120",
        "train.validate_every=120",
    ]
    Trainer(load_config("small", overrides), tmp / "run", show_progress=False).fit()
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(60)]
    (tmp / "fixture.en").write_text("".join(f"{line}\n" for line in sentences))
    return tmp


@pytest.fixture(scope="module")
def engines(trained):
    """The checkpoint on both engines, and the fixture's lines."""
    lines = (trained / "fixture.en").read_text().splitlines()
    return load_model(trained / "run"), open_ctranslate2(trained / "run"), lines


def texts(outputs):
    return [[o.text for o in found] for found in outputs]


@torch.no_grad()
def log_probs(model, source, target):
    """Per token of target + EOS: its log-probability under our model (a softmax over the whole
    vocabulary) and under the same softmax without PAD and BOS (what CTranslate2 normalises over:
    the export leaves PAD out, BOS has a -inf bias). One uncached, unbatched pass."""
    seq = [*target, EOS]
    memory = model.encode(encode_sources([source]))
    logits = model.decode(torch.tensor([[BOS, *seq[:-1]]]), memory)[0].float()
    full = logits.log_softmax(-1)
    kept = logits.clone()
    kept[:, [PAD, BOS]] = -math.inf
    outputs = kept.log_softmax(-1)
    return [float(full[i, t]) for i, t in enumerate(seq)], [float(outputs[i, t]) for i, t in enumerate(seq)]


def ids(found):
    return [[h.tokens for h in hyps] for hyps in found]


def sources_of(loaded, lines):
    return [loaded.src_vocab.encode(line) for line in lines]


@pytest.mark.parametrize("search", [{"greedy": True}, {"beam": 4, "alpha": 0.0}])
def test_the_same_outputs_as_the_torch_engine_each_within_its_own_length_limit(engines, search):
    """All 60 fixture sentences give the torch engine's outputs, greedy and beam 4 (alpha 0), also
    where outputs stop at their own limit a * |x| + b in batches of sentences whose limits differ
    (CTranslate2 takes one limit per call). Under (0.5, 1) the best of ten beam searches is cut
    at its limit, and beats the empty output that a search under the batch's longest limit finds."""
    ours, theirs, lines = engines
    sources = sources_of(ours, lines)
    for a, b in ((1.0, 50), (0.5, 1)):
        options = decode_options(ours.config.decode, max_len_a=a, max_len_b=b, **search)
        mine = TorchEngine(ours.model).decode(Request(sources, options))
        found = theirs.engine.decode(Request(sources, options))
        assert ids(found) == ids(mine)
        limits = [max(1, int(a * len(s) + b)) for s in sources]
        assert all(len(h[0].tokens) <= limit for h, limit in zip(found, limits, strict=True))
        if b == 1:  # many outputs stop at their own limit, in batches with longer and shorter ones
            assert sum(len(h[0].tokens) == limit for h, limit in zip(found, limits, strict=True)) >= 10
    texts_found, _ = translate_lines(theirs, lines, options)
    assert texts(texts_found) == texts(translate_lines(ours, lines, options)[0])


@pytest.mark.parametrize("nbest", [1, 3])
def test_one_call_under_the_longest_limit_gives_each_sentence_its_own_limits_outputs(
    engines, nbest, monkeypatch
):
    """With a length penalty, a batch's beam searches run in one call under its longest limit,
    and only sentences whose search reached their own limit are searched again: the outputs are
    those of one call per distinct limit (the searches compared), in fewer calls."""
    ours, theirs, lines = engines
    engine, sources = theirs.engine, sources_of(ours, lines)
    calls = []
    translate_batch = engine.translator.translator.translate_batch

    class Counted:  # the translator, its calls counted
        def translate_batch(self, batch, *args, **kwargs):
            calls.append(len(batch))
            return translate_batch(batch, *args, **kwargs)

    monkeypatch.setattr(engine.translator, "translator", Counted())
    for a, b in ((1.0, 50), (1.0, 3), (0.5, 1)):
        options = decode_options(ours.config.decode, beam=4, nbest=nbest, alpha=0.6, max_len_a=a, max_len_b=b)
        calls.clear()
        found = engine.decode(Request(sources, options))
        one_call = list(calls)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                type(engine),
                "_under_longest_limit",
                lambda self, batch: ([[] for _ in batch.sources], list(range(len(batch.sources)))),
            )
            calls.clear()
            per_limit = engine.decode(Request(sources, options))
        assert ids(found) == ids(per_limit)
        scores = [h.score for f in found for h in f]
        assert scores == pytest.approx([h.score for f in per_limit for h in f])
        assert one_call[0] == len(sources) and len(calls) > len(one_call)  # all in the first call
        if b == 50:  # every search over well before its limit: nothing searched again
            assert len(one_call) == 1
        else:  # some reached their limit and were searched again, in calls of their own limits
            assert len(one_call) > 1


def test_nbest_lists_are_the_same_in_the_same_order_but_for_ties(engines):
    ours, theirs, lines = engines
    options = decode_options(ours.config.decode, beam=4, nbest=4, alpha=0.0)
    mine, _ = translate_lines(ours, lines, options)
    found, _ = translate_lines(theirs, lines, options)
    assert all(len(f) == 4 for f in found)
    for outputs, ours_outputs in zip(found, mine, strict=True):
        scores = [o.score for o in outputs]
        assert scores == sorted(scores, reverse=True)
        assert_same_order_but_for_ties(ours_outputs, outputs)


def assert_same_order_but_for_ties(mine, found):
    """The same n-best list in the same order, except that two hypotheses may swap where our gap
    between them is smaller than the engines' own difference in scoring them (CTranslate2
    normalises without PAD and BOS, see log_probs; how many threads it sums with moves it too)."""
    assert sorted(o.text for o in found) == sorted(o.text for o in mine)
    ours = {o.text: o.score for o in mine}
    theirs = {o.text: o.score for o in found}
    rank = {o.text: i for i, o in enumerate(mine)}
    for i, a in enumerate(found):
        for b in found[i + 1 :]:
            if a.text != b.text and rank[a.text] > rank[b.text]:
                slack = max(abs(ours[t] - theirs[t]) for t in (a.text, b.text))
                assert ours[b.text] - ours[a.text] <= slack + 1e-6 and slack < 0.01, (a.text, b.text)


def expected_scores(model, source, hypothesis, limit, alpha):
    """Our score of a hypothesis, and the same from the probabilities CTranslate2 computes."""
    full, kept = log_probs(model, source, hypothesis.tokens)
    if len(hypothesis.tokens) == limit:  # stopped at the limit: without EOS
        full, kept = full[:-1], kept[:-1]
    lp = length_penalty(len(full), alpha)
    return sum(full) / lp, sum(kept) / lp


@pytest.mark.parametrize("search", [{"greedy": True}, {"beam": 4, "alpha": 0.0}, {"beam": 3, "alpha": 0.6}])
def test_scores_are_ours_computed_from_ctranslate2s_probabilities(engines, search):
    """The score reported for each output is log P (EOS included) / ((5 + |Y|) / 6)^alpha, computed
    here independently, token by token: exactly with the probabilities CTranslate2 computes (its
    softmax leaves out PAD and BOS, which can never be output), and within the mass of PAD and BOS
    of the torch engine's scores."""
    ours, theirs, lines = engines
    greedy = search.get("greedy", False)
    options = decode_options(ours.config.decode, nbest=2 if not greedy else 1, **search)
    sources = sources_of(ours, lines[:20])
    alpha = 0.0 if greedy else options.alpha
    for source, hyps in zip(sources, theirs.engine.decode(Request(sources, options)), strict=True):
        limit = int(options.max_len_a * len(source) + options.max_len_b)
        for hypothesis in hyps:
            mine, kept = expected_scores(ours.model, source, hypothesis, limit, alpha)
            assert hypothesis.score == pytest.approx(kept, abs=2e-4)
            assert 0 <= hypothesis.score - mine <= kept - mine + 2e-4


@pytest.mark.parametrize("search", [{"greedy": True}, {"beam": 4, "alpha": 0.6}, {"beam": 4, "alpha": 0.0}])
def test_outputs_without_scores_are_the_same_outputs(engines, search):
    """scores=False (translate's one-best text, evaluate) leaves out CTranslate2's scores and the
    rescoring of cut outputs, and nothing else: the same outputs, also where outputs are cut at
    their own limit (a = 0.5, b = 1), with NaN scores."""
    ours, theirs, lines = engines
    sources = sources_of(ours, lines)
    for a, b in ((1.0, 50), (0.5, 1)):
        options = decode_options(ours.config.decode, max_len_a=a, max_len_b=b, nbest=1, **search)
        scored = theirs.engine.decode(Request(sources, options))
        bare = theirs.engine.decode(Request(sources, options, scores=False))
        assert ids(bare) == ids(scored)
        assert all(math.isnan(h.score) and math.isnan(h.log_prob) for hyps in bare for h in hyps)
        assert not any(math.isnan(h.score) for hyps in scored for h in hyps)


def test_forced_prefixes_are_honoured(engines):
    ours, theirs, lines = engines
    prefixes = ["THE CAT" if i % 2 else "" for i in range(len(lines))]
    forced = [ours.tgt_vocab.encode(p) for p in prefixes]
    sources = sources_of(ours, lines)
    for greedy, search in ((True, {}), (False, {"beam": 4, "alpha": 0.0})):
        options = decode_options(ours.config.decode, greedy=greedy or None, **search)
        mine, _ = translate_lines(ours, lines, options, prefixes=prefixes)
        found, _ = translate_lines(theirs, lines, options, prefixes=prefixes)
        assert texts(found) == texts(mine)
        assert all(f[0].text.startswith("THE CAT") for f in found[1::2])
        hyps = theirs.engine.decode(Request(sources, options, prefixes=forced))
        for source, prefix, found_hyps in zip(sources, forced, hyps, strict=True):
            assert found_hyps[0].tokens[: len(prefix)] == prefix
            limit = int(options.max_len_a * len(source) + options.max_len_b)
            _, kept = expected_scores(ours.model, source, found_hyps[0], limit, 0.0)
            assert found_hyps[0].score == pytest.approx(kept, abs=2e-4)  # the prefix's tokens count


def test_int8_weights_stay_within_two_bleu_of_float32(trained, engines):
    """int8 (`--quantize int8`) against float32 on the fixture, both scored against the references."""
    from transduce.metrics import corpus_scores

    ours, theirs, lines = engines
    refs = [line.upper() for line in lines]
    quantised = open_ctranslate2(trained / "run", "int8")
    options = decode_options(ours.config.decode, beam=4, alpha=0.0)
    exact, _ = translate_lines(theirs, lines, options)
    small, _ = translate_lines(quantised, lines, options)
    bleu = [corpus_scores([f[0].text for f in outputs], refs).bleu for outputs in (exact, small)]
    assert abs(bleu[0] - bleu[1]) <= 2.0, bleu
    assert (
        json.loads((cache_folder(quantised, "int8") / "transduce.json").read_text())["quantization"] == "int8"
    )


def test_scoring_gives_ctranslate2s_log_probabilities(engines):
    ours, theirs, lines = engines
    targets = [line.upper() for line in lines]
    mine = score_lines(ours, lines, targets, per_token=True)
    found = score_lines(theirs, lines, targets, per_token=True)
    for line, target, m, f in zip(lines, targets, mine, found, strict=True):
        full, kept = log_probs(ours.model, ours.src_vocab.encode(line), ours.tgt_vocab.encode(target))
        assert f.ids == m.ids and f.count == m.count
        assert f.tokens == pytest.approx(kept, abs=1e-4) and m.tokens == pytest.approx(full, abs=1e-4)
        assert f.log_prob == pytest.approx(sum(kept), abs=2e-4)


def test_sampling_repeats_with_its_seed(engines):
    ours, theirs, lines = engines
    options = decode_options(ours.config.decode, sample=True, seed=7, num_samples=3, max_len_b=3)
    first, _ = translate_lines(theirs, lines, options)
    again, _ = translate_lines(theirs, lines, options)
    other, _ = translate_lines(theirs, lines, decode_options(ours.config.decode, sample=True, seed=8))
    assert texts(first) == texts(again) and texts(first) != texts(other)
    assert all(len(f) == 3 for f in first)
    sources = sources_of(ours, lines)
    for source, samples in zip(sources, theirs.engine.decode(Request(sources, options)), strict=True):
        limit = len(source) + 3
        for sample in samples:  # cut to the limit where one ran past it, and scored as cut
            assert len(sample.tokens) <= limit
            _, kept = expected_scores(ours.model, source, sample, limit, 0.0)
            assert sample.score == pytest.approx(kept, abs=2e-4)


def test_a_shortlist_restricts_the_same_batches_as_ours(trained, engines):
    """`--shortlist` as CTranslate2's vocabulary map, over the same batches: the same strings."""
    from transduce.data.dataset import Dataset
    from transduce.decode.shortlist import build_shortlist

    ours, _, lines = engines
    data = Dataset(trained / "data")
    pairs = [data.splits["train"].pair(i) for i in range(len(data.splits["train"]))]
    listed = build_shortlist(pairs, len(data.src_vocab), len(data.tgt_vocab), per_token=2, frequent=3)
    theirs = open_ctranslate2(trained / "run", shortlist=listed)
    options = decode_options(ours.config.decode, max_tokens=40)
    mine, _ = translate_lines(ours, lines, greedily(options), shortlist=listed)
    found, _ = translate_lines(theirs, lines, greedily(options), shortlist=listed)
    assert texts(found) == texts(mine)
    full, _ = translate_lines(theirs, lines, greedily(options))
    assert texts(full) != texts(found)  # the shortlist did restrict the outputs


def test_the_export_cache_is_reused_and_replaced_when_the_checkpoint_changes(tmp_path):
    """One export per weights and quantisation, beside the weights; weights changed in place (their
    checksum recorded) get a new one, and a cached export that does not match its checkpoint is
    written again."""
    import hashlib

    from transduce.fileio import write_safetensors
    from transduce.store.checkpoint import state_tensors, step_checkpoints

    run = train_tiny(tmp_path / "run", 2)
    checkpoint = step_checkpoints(run / "checkpoints")[-1]
    first = open_ctranslate2(checkpoint)
    folder = cache_folder(first, "float32")
    written = (folder / "model.bin").stat().st_mtime_ns
    assert folder.parent == checkpoint and folder.name.startswith("ctranslate2-float32-")
    assert cache_folder(open_ctranslate2(run), "float32") == folder  # a run directory: its checkpoint
    assert (folder / "model.bin").stat().st_mtime_ns == written  # reused, not written again

    loaded = load_model(checkpoint)
    with torch.no_grad():
        loaded.model.src_embed.tokens.weight.mul_(-1.0)
    write_safetensors(checkpoint / "model.safetensors", state_tensors(loaded.model))
    meta = json.loads((checkpoint / "config.json").read_text())
    digest = hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()
    meta["checksums"]["model.safetensors"] = digest
    (checkpoint / "config.json").write_text(json.dumps(meta))
    changed = open_ctranslate2(checkpoint)
    assert cache_folder(changed, "float32").name == f"ctranslate2-float32-{digest[:12]}" != folder.name
    lines = ["1 2 3", "4 4 5 6", "7 1"]
    options = decode_options(loaded.config.decode)
    expected = texts(translate_lines(load_model(checkpoint), lines, greedily(options))[0])
    assert texts(translate_lines(changed, lines, greedily(options))[0]) == expected
    assert texts(translate_lines(first, lines, greedily(options))[0]) != expected  # the old export differs

    current = cache_folder(changed, "float32")
    info = json.loads((current / "transduce.json").read_text())
    info["vocab_sha256"] = "0" * 64  # as if the vocabularies had changed under the same weights
    (current / "transduce.json").write_text(json.dumps(info))
    open_ctranslate2(checkpoint)
    assert json.loads((current / "transduce.json").read_text())["vocab_sha256"] != "0" * 64

    intact = (current / "model.bin").read_bytes()
    with (current / "model.bin").open("r+b") as model:  # damaged after it was written
        model.seek(100)
        model.write(b"\0" * 16)
    assert texts(translate_lines(open_ctranslate2(checkpoint), lines, greedily(options))[0]) == expected
    assert (current / "model.bin").read_bytes() == intact  # written again

    shutil.rmtree(current)
    current.mkdir()
    (current / "notes.txt").write_text("mine")  # a folder of the user's where the cache would go
    with pytest.raises(EngineError, match="holds files that no export wrote"):
        open_ctranslate2(checkpoint)
    assert [p.name for p in current.iterdir()] == ["notes.txt"]


def test_an_export_directory_decodes_as_its_checkpoint(trained, engines, tmp_path):
    ours, theirs, lines = engines
    out = tmp_path / "exported"
    result = CliRunner().invoke(
        app, ["export", str(trained / "run"), "--format", "ctranslate2", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    given = open_ctranslate2(out)
    options = decode_options(ours.config.decode, beam=2, alpha=0.0, nbest=2)
    assert texts(translate_lines(given, lines, options)[0]) == texts(
        translate_lines(theirs, lines, options)[0]
    )
    assert given.config.decode == theirs.config.decode


def test_the_commands_take_the_engine(trained, engines, tmp_path):
    """translate, evaluate and score with --engine ctranslate2 print what the torch engine prints
    (translations exactly; BLEU to the same outputs; scores within the PAD and BOS mass)."""
    _, _, lines = engines
    source = str(trained / "fixture.en")
    (tmp_path / "ref").write_text("".join(f"{line.upper()}\n" for line in lines))
    runs = {}
    for engine in ("torch", "ctranslate2"):
        run = ["--engine", engine]
        translated = CliRunner().invoke(
            app, ["translate", str(trained / "run"), "-i", source, "--greedy", *run]
        )
        evaluated = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(trained / "run"),
                "--src",
                source,
                "--ref",
                str(tmp_path / "ref"),
                "--greedy",
                *run,
            ],
        )
        scored = CliRunner().invoke(
            app, ["score", str(trained / "run"), "--src", source, "--tgt", str(tmp_path / "ref"), *run]
        )
        for result in (translated, evaluated, scored):
            assert result.exit_code == 0, result.output
        runs[engine] = translated.stdout, evaluated.stdout, scored.stdout
    assert runs["torch"][0] == runs["ctranslate2"][0] and runs["torch"][0].count("\n") == len(lines)
    assert runs["torch"][1].splitlines()[0] == runs["ctranslate2"][1].splitlines()[0]  # BLEU
    mine = [float(row.split("\t")[0]) for row in runs["torch"][2].splitlines()]
    found = [float(row.split("\t")[0]) for row in runs["ctranslate2"][2].splitlines()]
    assert all(f >= m - 2e-4 and f - m < 0.1 for f, m in zip(found, mine, strict=True))


def test_the_server_answers_on_ctranslate2(engines):
    """The same request schema, limits and batching; /attention and a request's seed are refused."""
    from concurrent.futures import ThreadPoolExecutor

    from transduce.serve import Limits, create_app

    ours, theirs, lines = engines
    application = create_app(theirs, Limits(max_segments=16, max_wait_ms=300))
    with Server(application) as server:
        body = {"segments": lines[:12], "beam": 3, "alpha": 0.0, "nbest": 2}
        response = httpx.post(f"{server.url}/translate", json=body, timeout=60)
        assert response.status_code == 200, response.text
        options = decode_options(ours.config.decode, beam=3, alpha=0.0, nbest=2)
        mine, _ = translate_lines(ours, lines[:12], options)
        assert [[t["text"] for t in row] for row in response.json()["translations"]] == texts(mine)
        before = application.state.batcher.batches
        with ThreadPoolExecutor(6) as pool:
            bodies = [{"segments": [line], "greedy": True} for line in lines[:6]]
            answers = list(
                pool.map(lambda b: httpx.post(f"{server.url}/translate", json=b, timeout=60), bodies)
            )
        greedy, _ = translate_lines(ours, lines[:6], greedily(decode_options(ours.config.decode)))
        assert [[a.json()["translations"][0]["text"]] for a in answers] == texts(greedy)
        assert application.state.batcher.batches - before < 6  # concurrent requests shared calls
        info = httpx.get(f"{server.url}/info").json()
        assert (info["engine"], info["attention"]) == ("ctranslate2", False)
        too_many = httpx.post(f"{server.url}/translate", json={"segments": ["a"] * 17})
        assert too_many.status_code == 413
        attention = httpx.post(f"{server.url}/attention", json={"segment": "the cat"})
        assert attention.status_code == 422 and "torch engine" in attention.text
        seeded = httpx.post(f"{server.url}/translate", json={"segments": ["the"], "sample": True, "seed": 3})
        assert seeded.status_code == 422 and "seed" in seeded.text
        unseeded = httpx.post(f"{server.url}/translate", json={"segments": ["the"], "sample": True})
        assert unseeded.status_code == 200


def test_the_demo_page_on_ctranslate2_shows_translations_and_asks_for_no_attention(engines):
    """The page reads the engine from /info: it translates, asks nothing of /attention (which
    the engine refuses, and whose refusal the page showed in red under every translation) and
    says once why there is no map."""
    from transduce.serve import create_app

    ours, theirs, lines = engines
    with Server(create_app(theirs)) as server, browser_page() as page:
        asked = []
        page.on("request", lambda request: asked.append(request.url.removeprefix(server.url)))
        page.goto(server.url + "/")
        page.fill("#source", "\n".join(lines[:2]))
        page.click("#translate")
        page.wait_for_selector("#output div:nth-child(2)", timeout=30000)
        page.wait_for_timeout(500)  # time for a request for attention, had the page made one
        shown = page.locator("#output div").all_inner_texts()
        error, note, maps = (
            page.inner_text("#error"),
            page.inner_text("#note"),
            page.locator("table.heat").count(),
        )
    want, _ = translate_lines(ours, lines[:2], decode_options(ours.config.decode))
    assert shown == [found[0].text for found in want]
    assert (error, maps) == ("", 0)
    assert note == "The ctranslate2 engine gives no attention weights; serve with --engine torch to see them."
    assert asked == ["/", "/info", "/translate"]


def test_without_the_package_the_engine_is_one_clear_error(trained, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` raises ImportError
    result = CliRunner().invoke(
        app, ["translate", str(trained / "run"), "--engine", "ctranslate2"], input="the\n"
    )
    assert result.exit_code == 2 and "pip install ctranslate2" in result.output
    with pytest.raises(EngineError, match="pip install ctranslate2"):
        open_ctranslate2(trained / "run")


def test_the_python_api_takes_the_engine(trained, engines):
    import transduce

    _, _, lines = engines
    model = transduce.load(trained / "run", engine="ctranslate2")
    expected = transduce.translate(transduce.load(trained / "run"), lines, beam=4, alpha=0.0)
    assert transduce.translate(model, lines, beam=4, alpha=0.0) == expected
    with pytest.raises(ValueError, match="engine 'onnx': allowed: torch, ctranslate2"):
        transduce.load(trained / "run", engine="onnx")


def test_translating_with_the_torch_engine_loads_no_ctranslate2_module(trained):
    """The engines' table opens CTranslate2 only when a model is opened with it: `translate` with
    the torch engine, in a fresh process, imports neither CTranslate2 nor our engine and export
    modules for it (about 30 ms of every start before)."""
    code = (
        "import sys\n"
        "from transduce.cli import main\n"
        "sys.argv[0] = 'transduce'\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(sorted(m for m in sys.modules if 'ctranslate2' in m), file=sys.stderr)\n"
    )
    argv = ["translate", str(trained / "run"), "-i", str(trained / "fixture.en")]
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 60
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_an_opened_model_makes_its_token_tables_once(engines):
    """Every decoding call takes an engine of its own (`shortlisted`); the tables mapping our ids to
    the export's strings are the opened model's, not rebuilt per call (4 of a one-line request's
    5 ms at 8,000 pieces), and they map both ways."""
    _, theirs, lines = engines
    engine = theirs.engine
    assert engine.shortlisted(None).names is engine.names
    tgt = theirs.tgt_vocab
    assert engine.names.tgt == [tgt.token(i) for i in range(len(tgt))]
    assert all(engine.names.tgt_ids[engine.names.tgt[i]] == i for i in range(len(tgt)) if i != PAD)
    before = engine.names
    translate_lines(theirs, lines[:2], greedily(decode_options(theirs.config.decode)))
    assert theirs.engine.names is before
