"""The server's decoding toolbox: sampling fields (reproducible per segment, whatever the batch)
and ensembles of several checkpoints."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from serving import Server
from tiny import train_tiny

from transduce.decode.options import decode_options
from transduce.decode.torch_engine import decode_all
from transduce.serve import Limits, create_app
from transduce.store.load import load_model

SEGMENTS = ["1 2 3", "4 5", "", "6 7 8 9", "3 3"]
SAMPLING = {"sample": True, "seed": 11, "num_samples": 3, "temperature": 1.5}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return load_model(train_tiny(tmp_path_factory.mktemp("toolbox") / "run", 20))


@pytest.fixture(scope="module")
def server(loaded):
    app = create_app([loaded, loaded], Limits(max_wait_ms=300, max_batch_tokens=64))
    with Server(app) as running:
        yield running


def post(server, **body):
    response = httpx.post(f"{server.url}/translate", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def test_samples_equal_direct_sampling_and_do_not_depend_on_the_batch(server, loaded):
    got = post(server, segments=SEGMENTS, **SAMPLING)
    cfg = decode_options(loaded.config.decode, **SAMPLING)
    sources = [loaded.src_vocab.encode(s) if s else [] for s in SEGMENTS]
    direct = decode_all(loaded.model, sources, cfg)
    assert [[t["text"] for t in row] for row in got[:2]] == [
        [loaded.tgt_vocab.decode(h.tokens) for h in hyps] for hyps in direct[:2]
    ]
    assert [len(row) for row in got] == [3, 3, 1, 3, 3] and got[2] == [{"text": "", "score": 0.0}]
    with ThreadPoolExecutor(4) as pool:  # batched together, and split over several calls
        again = list(pool.map(lambda _: post(server, segments=SEGMENTS, **SAMPLING), range(4)))
    for other in again:  # the same samples; scores equal up to the batch's float rounding
        assert [[t["text"] for t in row] for row in other] == [[t["text"] for t in row] for row in got]
        scores = [t["score"] for row in other for t in row]
        assert scores == pytest.approx([t["score"] for row in got for t in row], abs=1e-4)


def test_an_ensemble_of_one_model_twice_translates_as_the_model(server, loaded):
    got = post(server, segments=SEGMENTS, beam=2, alpha=0.0)
    cfg = loaded.config.decode.model_copy(update={"beam": 2, "alpha": 0.0})
    direct = decode_all(loaded.model, [loaded.src_vocab.encode(s) if s else [] for s in SEGMENTS], cfg)
    assert [t["text"] for t in got] == [loaded.tgt_vocab.decode(h[0].tokens) if h else "" for h in direct]
    info = httpx.get(f"{server.url}/info").json()
    assert info["ensemble"] == [loaded.path.name, loaded.path.name]


def test_sampling_work_counts_the_samples(server):
    response = httpx.post(
        f"{server.url}/translate", json={"segments": ["1 2 3 4 5 6 7"], "sample": True, "num_samples": 9}
    )
    assert response.status_code == 413 and "64 per segment" in response.text  # 8 tokens x 9 samples
    bad = httpx.post(f"{server.url}/translate", json={"segments": ["1"], "sample": True, "top_p": 1.5})
    assert bad.status_code == 422


def test_prefixes_lengths_and_greedy_search_equal_direct_decoding(server, loaded):
    """The command line's decoding settings reach the server: forced prefixes, length limits,
    greedy search."""
    prefixes = ["7", "", "", "1 2", "3"]
    settings = {"max_len_b": 4, "min_len": 2, "alpha": 0.0}
    got = post(server, segments=SEGMENTS, prefixes=prefixes, **settings)
    cfg = loaded.config.decode.model_copy(update=settings)
    sources = [loaded.src_vocab.encode(s) if s else [] for s in SEGMENTS]
    forced = [loaded.tgt_vocab.encode(p) if p else [] for p in prefixes]
    direct = decode_all(loaded.model, sources, cfg, prefixes=forced)
    want = [loaded.tgt_vocab.decode(h[0].tokens) if h else "" for h in direct]
    assert [t["text"] for t in got] == want
    assert got[0]["text"].split()[0] == "7" and got[3]["text"].split()[:2] == ["1", "2"]
    assert all(2 <= len(t.split()) <= len(s.split()) + 4 for s, t in zip(SEGMENTS, want, strict=True) if s)
    greedy = post(server, segments=SEGMENTS, greedy=True)
    direct = decode_all(loaded.model, sources, loaded.config.decode.model_copy(update={"search": "greedy"}))
    assert [t["text"] for t in greedy] == [loaded.tgt_vocab.decode(h[0].tokens) if h else "" for h in direct]


def test_sampling_a_classifier_is_422_naming_the_field(tmp_path):
    from fastapi.testclient import TestClient

    run = train_tiny(
        tmp_path / "classifier", 2, "model.kind=encoder", "model.num_classes=3", "data.task=majority"
    )
    with TestClient(create_app(load_model(run))) as client:
        refused = client.post("/translate", json={"segments": ["1 2 3"], "sample": True})
        labelled = client.post("/translate", json={"segments": ["1 2 3"]})
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["detail"]
    assert error["loc"] == ["body", "sample"] and "does not apply to a classifier" in error["msg"]
    assert labelled.status_code == 200 and labelled.json()["translations"][0]["text"] in (
        "low",
        "high",
        "tie",
    )
