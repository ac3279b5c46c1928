"""Vocabulary shortlists: the table against a brute-force Dice count, decoding with every token
listed equal to full decoding, a restricted one equal to full decoding with the other tokens
masked, the decoding forms of the output matrix, and the file's contract."""

import math
import random

import pytest
import torch
from safetensors.torch import save_file
from tiny import train_tiny
from tiny_models import batch, tiny_model
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import DecodeConfig
from transduce.data.vocab import BOS, EOS, PAD
from transduce.decode import shortlist as shortlist_module
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.decode.shortlist import Shortlist, Shortlisted, ShortlistError, build_shortlist, output_matrix
from transduce.decode.torch_engine import decode_all
from transduce.model.packed import pack_for_cpu, packing_available
from transduce.model.quantize import quantize_int8

V = 12


def corpus(n: int = 60, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.randrange(3, 9) for _ in range(rng.randint(1, 6))]
        tgt = [(s + 2) % V if rng.random() < 0.8 else rng.randrange(3, V) for s in src]
        pairs.append((src, tgt))
    return pairs


def brute_force(pairs, per_token: int, frequent: int) -> tuple[list[list[int]], list[int]]:
    """Per source id its top target ids by Dice over sentence pairs (lower id first on ties), and
    the most frequent target tokens, with Python sets and loops."""
    c_src, c_tgt, c_both, tokens = [0] * V, [0] * V, {}, [0] * V
    for src, tgt in pairs:
        for s in set(src):
            c_src[s] += 1
        for t in set(tgt):
            c_tgt[t] += 1
        for t in tgt:
            tokens[t] += 1
        for s in set(src):
            for t in set(tgt):
                c_both[s, t] = c_both.get((s, t), 0) + 1
    table = []
    for s in range(V):
        scored = [(-2 * c / (c_src[s] + c_tgt[t]), t) for (s2, t), c in c_both.items() if s2 == s]
        table.append([t for _, t in sorted(scored)[:per_token]])
    top = sorted(range(V), key=lambda t: (-tokens[t], t))[:frequent]
    return table, sorted(t for t in top if tokens[t] > 0)


@pytest.mark.parametrize("chunk", [7, 10_000])
def test_table_matches_brute_force_dice(monkeypatch, chunk):
    monkeypatch.setattr(shortlist_module, "CHUNK", chunk)  # counts merged across chunks, or in one
    pairs = corpus()
    built = build_shortlist(pairs, V, V, per_token=3, frequent=4)
    table, top = brute_force(pairs, 3, 4)
    assert [[t for t in row if t >= 0] for row in built.per_token.tolist()] == table
    assert built.frequent.tolist() == top
    assert all(row == [] for row in table[:3]) and all(len(row) == 3 for row in table[3:9])


def test_allowed_is_the_union_of_the_batch_lists():
    per_token = torch.full((V, 2), -1, dtype=torch.int32)
    per_token[4] = torch.tensor([7, 9], dtype=torch.int32)
    per_token[5] = torch.tensor([9, -1], dtype=torch.int32)
    listed = Shortlist(per_token, torch.tensor([3], dtype=torch.int32), V)
    src = torch.tensor([[4, EOS, PAD], [5, 5, EOS]])
    assert listed.allowed(src).tolist() == sorted({7, 9, 3, EOS})
    assert listed.allowed(src, [11]).tolist() == sorted({7, 9, 3, EOS, 11})


def everything() -> Shortlist:
    return Shortlist(torch.arange(V).repeat(V, 1).int(), torch.zeros(0, dtype=torch.int32), V)


SOURCES = [[4, 5, 6], [7], [3, 9, 9, 10, 11]]


def test_listing_every_token_decodes_as_the_full_vocabulary():
    model = tiny_model(V, seed=1)
    src = batch(SOURCES)
    listed = everything()
    wrapped = Shortlisted(model, listed.allowed(src), *output_matrix(model))
    for search in (
        lambda m: beam_search(m, src, 3, 0.6, 3, max_len_b=6),
        lambda m: [greedy(m, src, max_len_b=6)],
    ):
        full, short = search(model), search(wrapped)
        for a, b in zip(full, short, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


class Masked:
    """The reference: the full model's logits with every token outside `allowed` set to -inf."""

    def __init__(self, model, allowed):
        self.model, self.allowed = model, allowed

    def encode(self, src, **source):
        return self.model.encode(src, **source)

    def new_cache(self):
        return self.model.new_cache()

    def decode(self, tgt, memory, cache=None):
        logits = self.model.decode(tgt, memory, cache)
        keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
        keep[self.allowed] = True
        return logits.masked_fill(~keep, -math.inf)


def test_a_restricted_list_decodes_as_the_masked_full_model():
    model = tiny_model(V, seed=2)
    src = batch(SOURCES)
    listed = build_shortlist(corpus(), V, V, per_token=2, frequent=1)
    allowed = listed.allowed(src)
    assert len(allowed) < V - 2  # a real restriction
    wrapped = Shortlisted(model, allowed, *output_matrix(model))
    short = beam_search(wrapped, src, 4, 0.6, 4, max_len_b=6)
    reference = beam_search(Masked(model, allowed), src, 4, 0.6, 4, max_len_b=6)
    for a, b in zip(short, reference, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
        assert all(t in allowed.tolist() for h in a for t in h.tokens)
    full = beam_search(model, src, 4, 0.6, 1, max_len_b=6)
    assert [h[0].tokens for h in full] != [h[0].tokens for h in short]  # and it changed something


def test_decode_all_takes_the_shortlist_per_batch():
    model = tiny_model(V, seed=3)
    cfg = DecodeConfig(beam=3, max_len_b=6, max_tokens=4)  # several batches
    listed = build_shortlist(corpus(), V, V, per_token=2, frequent=1)
    results = decode_all(model, SOURCES, cfg, shortlist=listed)
    for source, hyps in zip(SOURCES, results, strict=True):
        alone = beam_search(
            Shortlisted(model, listed.allowed(batch([source])), *output_matrix(model)),
            batch([source]),
            3,
            cfg.alpha,
            1,
            max_len_b=6,
        )
        assert hyps[0].tokens == alone[0][0].tokens
    assert [h[0].tokens for h in decode_all(model, SOURCES, cfg, shortlist=everything())] == [
        h[0].tokens for h in decode_all(model, SOURCES, cfg)
    ]
    with pytest.raises(
        ShortlistError, match=r"vocabularies of 12 \(source\) and 12 \(target\) entries; the model"
    ):
        decode_all(tiny_model(V + 1), SOURCES, cfg, shortlist=listed)


@pytest.mark.parametrize("form", ["packed", "int8"])
def test_output_matrix_of_decoding_forms(form):
    model = tiny_model(V, seed=4)
    weight, bias = output_matrix(model)
    if form == "packed":
        if not packing_available():
            pytest.skip("oneDNN packing is not available in this build")
        decoded = pack_for_cpu(model)
        assert torch.equal(output_matrix(decoded)[0], weight)
        tolerance = 0.0
    else:
        decoded = quantize_int8(model, min_weights=0)
        tolerance = float(weight.abs().max()) / 127  # one quantisation step of the largest row
    got, got_bias = output_matrix(decoded)
    assert got.shape == weight.shape and (got - weight).abs().max() <= tolerance + 1e-6
    assert (got_bias is None) == (bias is None)
    src = batch(SOURCES)
    wrapped = Shortlisted(decoded, everything().allowed(src), got, got_bias)
    with torch.no_grad():
        memory = decoded.encode(src)
        tgt = torch.full((len(SOURCES), 1), BOS)
        listed = wrapped.decode(tgt, memory)
        assert torch.allclose(
            listed, torch.nn.functional.linear(decoded.decode_states(tgt, memory), got, got_bias)
        )
        # int8 projects the listed rows in float32 from their dequantized weights, not from int8
        # activations: within 2% of the largest logit of the int8 projection
        tolerance = 1e-4 if form == "packed" else 0.02 * float(listed.abs().max())
        assert torch.allclose(listed, decoded.decode(tgt, memory), atol=tolerance)


def test_the_file_round_trips_and_bad_files_are_refused(tmp_path):
    built = build_shortlist(corpus(), V, V, per_token=3, frequent=2)
    built.save(tmp_path / "s.safetensors")
    loaded = Shortlist.load(tmp_path / "s.safetensors")
    assert torch.equal(loaded.per_token, built.per_token) and torch.equal(loaded.frequent, built.frequent)
    assert loaded.tgt_vocab_size == V
    build_shortlist(corpus(), V, V, per_token=1, frequent=0).save(tmp_path / "none-frequent")
    assert len(Shortlist.load(tmp_path / "none-frequent").frequent) == 0
    Shortlist(built.per_token.float(), built.frequent, V).save(tmp_path / "floats")
    Shortlist(built.per_token, built.frequent, 5).save(tmp_path / "small")
    (tmp_path / "junk").write_bytes(b"\x00" * 40)
    save_file({"x": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    rows = [
        (tmp_path / "none", "no such shortlist file"),
        (tmp_path / "junk", "not a readable shortlist"),
        (tmp_path / "other.safetensors", "not a shortlist written by `transduce shortlist`"),
        (tmp_path / "floats", "malformed shortlist"),
        (tmp_path / "small", "malformed shortlist"),
    ]
    for path, message in rows:
        with pytest.raises(ShortlistError, match=message):
            Shortlist.load(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("shortlist") / "r", 2)


def test_cli_builds_refuses_to_overwrite_and_decodes(run, tmp_path):
    runner = CliRunner()
    out = tmp_path / "list.safetensors"
    built = runner.invoke(app, ["shortlist", str(run / "data"), "-o", str(out), "--per-token", "3"])
    assert built.exit_code == 0, built.output
    assert "training pairs" in built.output and out.is_file()
    before = out.read_bytes()
    again = runner.invoke(app, ["shortlist", str(run / "data"), "-o", str(out)])
    assert again.exit_code == 2 and "exists; give --force" in again.output and out.read_bytes() == before
    forced = runner.invoke(
        app, ["shortlist", str(run / "data"), "-o", str(out), "--per-token", "2", "--force"]
    )
    assert forced.exit_code == 0 and out.read_bytes() != before
    wide = tmp_path / "wide.safetensors"  # every target token of the training data, always
    runner.invoke(app, ["shortlist", str(run / "data"), "-o", str(wide), "--frequent", "1000"])
    text = "1 2 3\n\n4 5\n"
    forced = ["--min-len", "3"]  # an untrained model would stop at once
    plain = runner.invoke(app, ["translate", str(run), *forced, "-o", str(tmp_path / "plain")], input=text)
    for listed in (out, wide):
        hyp = tmp_path / f"{listed.stem}.out"
        args = ["translate", str(run), *forced, "--shortlist", str(listed), "-o", str(hyp)]
        result = runner.invoke(app, args, input=text)
        assert result.exit_code == 0 == plain.exit_code, result.output
        assert [len(line.split()) >= 3 for line in hyp.read_text().splitlines()] == [True, False, True]
    assert (tmp_path / "wide.out").read_text() == (tmp_path / "plain").read_text()
    scored = runner.invoke(app, ["evaluate", str(run), "--split", "dev", "--shortlist", str(out)])
    assert scored.exit_code == 0, scored.output


def test_cli_bad_shortlists_end_in_one_error_line(run, tmp_path):
    runner = CliRunner()
    (tmp_path / "junk").write_bytes(b"junk")
    wrong = tmp_path / "wrong.safetensors"
    build_shortlist(corpus(), V, V).save(wrong)
    rows = [
        (["translate", str(run), "--shortlist", str(tmp_path / "none")], "no such shortlist file"),
        (["translate", str(run), "--shortlist", str(tmp_path / "junk")], "not a readable shortlist"),
        (["translate", str(run), "--shortlist", str(wrong)], "build it from the model's own training data"),
        (["shortlist", str(run), "-o", str(tmp_path / "x")], "not a prepared dataset"),
        (["shortlist", str(run / "data"), "-o", str(tmp_path)], "directory"),
    ]
    for args, message in rows:
        result = runner.invoke(app, args, input="1 2\n")
        assert result.exit_code == 2, (args, result.output)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
