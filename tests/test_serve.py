"""The REST server over real HTTP on a loopback port: translate, batching, limits, errors, page."""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from serving import Server, browser_page
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app as cli
from transduce.decode.torch_engine import decode_all
from transduce.serve import Limits, create_app
from transduce.store.load import load_model

SEGMENTS = ["1 2 3", "4 5", "", "6 7 8 9", "3 3"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("serve") / "run", 30)


@pytest.fixture(scope="module")
def served(checkpoint):
    loaded = load_model(checkpoint)
    app = create_app(loaded, Limits(max_segments=8, max_chars=50, max_wait_ms=300, max_body_bytes=4096))
    server = Server(app)
    yield server, loaded, app
    server.stop()


def expected(loaded, segments, **options):
    cfg = loaded.config.decode.model_copy(update=options)
    hyps = decode_all(loaded.model, [loaded.src_vocab.encode(s) if s.strip() else [] for s in segments], cfg)
    return [(loaded.tgt_vocab.decode(h[0].tokens), h[0].score) if h else ("", 0.0) for h in hyps]


def test_health_info_and_openapi(served):
    server, loaded, _ = served
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    info = httpx.get(f"{server.url}/info").json()
    assert info["src_vocab_size"] == len(loaded.src_vocab) and info["config"]["model"]["d_model"] == 32
    assert "version" in info and (info["engine"], info["attention"]) == ("torch", True)
    assert info["checkpoint"] == loaded.path.name and str(loaded.path.parent) not in str(info)
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert "/translate" in schema["paths"] and "/attention" in schema["paths"]
    assert [httpx.get(f"{server.url}{page}").status_code for page in ("/docs", "/redoc")] == [404, 404]


def test_translate_keeps_order_and_equals_direct_decoding(served):
    server, loaded, _ = served
    response = httpx.post(f"{server.url}/translate", json={"segments": SEGMENTS, "beam": 2, "alpha": 0.0})
    assert response.status_code == 200, response.text
    got = [(t["text"], t["score"]) for t in response.json()["translations"]]
    want = expected(loaded, SEGMENTS, beam=2, alpha=0.0)
    assert [g[0] for g in got] == [w[0] for w in want]
    assert all(abs(g[1] - w[1]) < 1e-4 for g, w in zip(got, want, strict=True))
    assert got[2] == ("", 0.0)


def test_nbest_returns_a_list_per_segment(served):
    server, _, _ = served
    body = httpx.post(
        f"{server.url}/translate", json={"segments": ["1 2", "3"], "beam": 3, "nbest": 3}
    ).json()
    assert [len(t) for t in body["translations"]] == [3, 3]
    scores = [t["score"] for t in body["translations"][0]]
    assert scores == sorted(scores, reverse=True)


def test_concurrent_requests_are_batched_and_equal_single_requests(served):
    server, loaded, app = served
    before = app.state.batcher.batches
    segments = [f"{i} {i + 1} {i}" for i in range(1, 9)]
    with ThreadPoolExecutor(8) as pool:
        responses = list(
            pool.map(
                lambda s: httpx.post(f"{server.url}/translate", json={"segments": [s]}, timeout=60), segments
            )
        )
    assert all(r.status_code == 200 for r in responses)
    got = [r.json()["translations"][0]["text"] for r in responses]
    assert got == [w[0] for w in expected(loaded, segments)]
    assert app.state.batcher.batches - before < len(segments)  # some requests shared a batch


def test_requests_over_the_limits_are_413(served):
    server, _, _ = served
    url = f"{server.url}/translate"
    too_many = httpx.post(url, json={"segments": ["1"] * 9})
    assert too_many.status_code == 413 and "at most 8" in too_many.json()["detail"]
    too_long = httpx.post(url, json={"segments": ["1 " * 30]})
    assert too_long.status_code == 413 and "characters" in too_long.json()["detail"]


# (id, a /translate body as sent, a fragment of the 422's message): JSON is taken as it is, never
# converted (a string or true is not a beam), and a body that cannot be read is a 422 too
BAD_BODIES = [
    ("not JSON", '{"segments": [', "JSON decode error: Expecting value"),
    ("segments a string", '{"segments": "1 2"}', "Input should be a valid list"),
    ("segments of numbers", '{"segments": [1, 2]}', "Input should be a valid string"),
    ("no segments", "{}", "Field required"),
    ("beam 0", '{"segments": ["1"], "beam": 0}', "greater than or equal to 1"),
    ("unknown key", '{"segments": ["1"], "colour": "red"}', "Extra inputs are not permitted"),
    ("nbest over beam", '{"segments": ["1"], "beam": 2, "nbest": 3}', "must not exceed"),
    ("beam a string", '{"segments": ["1"], "beam": "4"}', "Input should be a valid integer"),
    ("beam a boolean", '{"segments": ["1"], "beam": true}', "Input should be a valid integer"),
    ("alpha a string", '{"segments": ["1"], "alpha": "0.6"}', "Input should be a valid number"),
    ("a 5000-digit number", '{"segments": ["1"], "beam": 1' + "0" * 5000 + "}", "Exceeds the limit"),
    ("bytes not UTF-8", '{"segments": ["\udcff"]}', "can't decode byte 0xff"),
    # one source of truth: DecodeConfig's bounds (top_k <= 2**20, seed < 2**32), named by field
    ("top_k over its bound", '{"segments": ["1"], "sample": true, "top_k": 2000000}', "less than or equal"),
    ("seed over 32 bits", '{"segments": ["1"], "sample": true, "seed": 4294967296}', "less than or equal"),
    ("beam over the server's", '{"segments": ["1"], "beam": 65}', "less than or equal to 64"),
    # settings the decoding chosen would ignore are refused, not dropped
    ("sample with nbest", '{"segments": ["1"], "sample": true, "nbest": 2}', "give num_samples"),
    ("sample with beam", '{"segments": ["1"], "sample": true, "beam": 2}', "beam applies to beam search"),
    ("temperature alone", '{"segments": ["1"], "temperature": 2.0}', "temperature applies only to sampling"),
    ("num_samples alone", '{"segments": ["1"], "num_samples": 3}', "num_samples applies only to sampling"),
    ("top_k alone", '{"segments": ["1"], "top_k": 3}', "top_k applies only to sampling"),
    ("top_p alone", '{"segments": ["1"], "top_p": 0.5}', "top_p applies only to sampling"),
    ("greedy with sample", '{"segments": ["1"], "greedy": true, "sample": true}', "exclude each other"),
    (
        "greedy with beam",
        '{"segments": ["1"], "greedy": true, "beam": 2}',
        "beam applies to beam search, not to greedy",
    ),
    (
        "min_len above the limit",
        '{"segments": ["1"], "min_len": 200}',
        "min_len (200) is above input 1's output",
    ),
    (
        "search unknown",
        '{"segments": ["1"], "search": "random"}',
        "Input should be 'beam', 'greedy' or 'sample'",
    ),
    # the target language named by its field, not by --tgt-lang (issue 87's sweep, 2026-12-04)
    ("tgt_lang of a one-pair model", '{"segments": ["1"], "tgt_lang": "de"}', '"loc":["body","tgt_lang"]'),
    (
        "tgt_lang named as a field",
        '{"segments": ["1"], "tgt_lang": "de"}',
        "tgt_lang de: this model translates",
    ),
    ("too few prefixes", '{"segments": ["1", "2"], "prefixes": ["3"]}', "1 prefixes for 2 segments"),
    ("prefix too long", '{"segments": ["1"], "prefixes": ["' + "1 " * 60 + '"]}', "forced prefix has 60"),
]


@pytest.fixture(scope="module")
def roomy(served):
    """The model served with the default limits, whose body limit (1 MiB) admits 5000 digits."""
    server = Server(create_app(served[1]))
    yield server
    server.stop()


@pytest.mark.parametrize(("body", "fragment"), [r[1:] for r in BAD_BODIES], ids=[r[0] for r in BAD_BODIES])
def test_malformed_request_is_422_naming_the_fault(roomy, body, fragment):
    server = roomy
    response = httpx.post(
        f"{server.url}/translate",
        content=body.encode("utf-8", "surrogateescape"),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert fragment in response.text and len(response.content) < 500, response.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sample": True, "top_k": 2_000_000}, "top_k"),
        ({"sample": True, "nbest": 2}, "nbest"),
        ({"num_samples": 2}, "num_samples"),
        ({"beam": 2, "nbest": 3}, None),
    ],
)
def test_a_422_names_the_json_field_not_the_command_line_option(roomy, body, field):
    response = httpx.post(f"{roomy.url}/translate", json={"segments": ["1"], **body})
    assert response.status_code == 422, response.text
    assert "--" not in response.text, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == (["body", field] if field else ["body"]), error


@pytest.mark.parametrize("alpha", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_alpha_is_422_not_500(served, alpha):
    server, _, _ = served
    body = '{"segments": ["1 2"], "alpha": ' + alpha + "}"
    response = httpx.post(
        f"{server.url}/translate", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "alpha"]


def test_422_names_the_problem_without_echoing_the_input(served):
    server, _, _ = served
    marker = "echo-me-" * 500
    response = httpx.post(f"{server.url}/translate", json={"segments": marker})
    assert response.status_code == 422
    assert "echo-me" not in response.text and len(response.content) < 500
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "segments"] and error["msg"] and "input" not in error
    unknown = httpx.post(f"{server.url}/translate", json={"segments": ["1"], "colour": marker})
    assert unknown.status_code == 422 and "echo-me" not in unknown.text


def test_a_body_over_max_body_bytes_is_413_by_length_or_as_it_streams(served):
    server, _, _ = served
    url = f"{server.url}/translate"
    big = ('{"segments": ["' + "1 " * 30_000 + '"]}').encode()
    declared = httpx.post(url, content=big, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413 and "4096 bytes" in declared.json()["detail"]
    assert len(declared.content) < 200

    def chunks():
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    streamed = httpx.post(url, content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413 and "4096 bytes" in streamed.json()["detail"]
    assert httpx.post(url, json={"segments": ["1 2"] * 8}).status_code == 200


def test_a_decoding_error_fails_only_its_request(served, monkeypatch):
    server, _, _ = served
    from transduce.decode.torch_engine import TorchEngine  # the engine the server calls

    real = TorchEngine.decode

    def flaky(engine, request):
        if any(len(s) == 7 for s in request.sources):  # "9 9 9 9 9 9 9" is the poisoned input
            raise RuntimeError("simulated failure")
        return real(engine, request)

    monkeypatch.setattr(TorchEngine, "decode", flaky)
    with ThreadPoolExecutor(4) as pool:
        bodies = [["9 9 9 9 9 9 9"], ["1 2"], ["3 4"], ["5"]]
        responses = list(
            pool.map(lambda b: httpx.post(f"{server.url}/translate", json={"segments": b}), bodies)
        )
    assert responses[0].status_code == 500 and "simulated failure" in responses[0].json()["detail"]
    assert [r.status_code for r in responses[1:]] == [200, 200, 200], [r.text for r in responses]
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_attention_endpoint_shapes(served):
    server, _, _ = served
    body = httpx.post(f"{server.url}/attention", json={"segment": "1 2 3"}).json()
    assert body["source"][-1] == "</s>" and len(body["source"]) == 4
    assert len(body["weights"]) == len(body["target"])
    for row in body["weights"]:
        assert len(row) == 4 and abs(sum(row) - 1.0) < 1e-4


def test_attention_takes_segments_and_maps_the_translation_translate_gives(served):
    server = served[0]
    segments = ["1 2 3", "", "4 5 6 7"]
    response = httpx.post(f"{server.url}/attention", json={"segments": segments}, timeout=60)
    assert response.status_code == 200, response.text
    maps = response.json()["attentions"]
    translated = httpx.post(f"{server.url}/translate", json={"segments": segments}, timeout=60).json()
    assert [m["text"] for m in maps] == [t["text"] for t in translated["translations"]]
    assert maps[1] == {"text": "", "source": [], "target": [], "weights": []}
    for segment, found in zip(segments, maps, strict=True):
        if segment:
            assert found["source"] == [*segment.split(), "</s>"]
            assert found["target"] == [*found["text"].split(), "</s>"]  # rows: the output's tokens
            assert [len(row) for row in found["weights"]] == [len(found["source"])] * len(found["target"])
    one = httpx.post(f"{server.url}/attention", json={"segment": "1 2 3"}, timeout=60).json()
    assert {k: one[k] for k in ("text", "source", "target")} == {
        k: maps[0][k] for k in ("text", "source", "target")
    }
    both = httpx.post(f"{server.url}/attention", json={"segments": ["1"], "segment": "1"})
    assert both.status_code == 422 and "give" in both.text


def test_api_key_is_required_when_set(checkpoint):
    server = Server(create_app(load_model(checkpoint), api_key="s3cret"))
    try:
        url = f"{server.url}/translate"
        assert httpx.post(url, json={"segments": ["1"]}).status_code == 401
        for wrong in ("", "s3cre", "S3CRET", "s3cret-and-more", "x"):
            assert httpx.post(url, json={"segments": ["1"]}, headers={"X-API-Key": wrong}).status_code == 401
        ok = httpx.post(url, json={"segments": ["1"]}, headers={"X-API-Key": "s3cret"})
        assert ok.status_code == 200
        assert httpx.get(f"{server.url}/info").status_code == 401
        assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.stop()


def test_an_empty_api_key_is_refused(checkpoint, monkeypatch):
    with pytest.raises(ValueError, match="empty"):
        create_app(load_model(checkpoint), api_key="")
    given = CliRunner().invoke(cli, ["serve", str(checkpoint), "--api-key", ""])
    assert given.exit_code == 2 and given.output.startswith("error: --api-key is empty")
    assert given.output.count("\n") == 1
    monkeypatch.setenv("TRANSDUCE_API_KEY", "")
    from_env = CliRunner().invoke(cli, ["serve", str(checkpoint)])
    assert from_env.exit_code == 2 and from_env.output.startswith("error: TRANSDUCE_API_KEY is empty")


def test_shutdown_finishes_in_flight_requests(checkpoint, monkeypatch):
    from transduce.decode.torch_engine import TorchEngine  # the engine the server calls

    real = TorchEngine.decode

    def slow(engine, request):
        time.sleep(1.0)
        return real(engine, request)

    monkeypatch.setattr(TorchEngine, "decode", slow)
    server = Server(create_app(load_model(checkpoint)))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, f"{server.url}/translate", json={"segments": ["1 2"]}, timeout=30)
        time.sleep(0.3)  # the request is being decoded
        server.stop()
        response = pending.result()
    assert response.status_code == 200 and len(response.json()["translations"]) == 1
    assert not server.thread.is_alive()


def test_demo_page_in_headless_chromium(served):
    server, loaded, _ = served
    with browser_page() as page:
        page.goto(server.url + "/")
        page.fill("#source", "1 2 3")
        page.click("#translate")
        page.wait_for_selector("table.heat tbody tr", timeout=30000)
        text = page.inner_text("#output")
        rows = page.locator("table.heat tbody tr").count()
        columns = page.locator("table.heat thead th").count()
        # two lines: two segments, two outputs, two maps (the tiny model's beam output of the second
        # is empty, its greedy output, which the page used to map, 50 tokens)
        page.fill("#source", "1 2 3\n4 5 6 7")
        page.click("#translate")
        page.wait_for_function("document.querySelectorAll('table.heat').length == 2", timeout=30000)
        lines = [page.inner_text(f"#output div:nth-child({i})") for i in (1, 2)]
        captions = page.locator("figcaption").all_inner_texts()
        tables = page.locator("table.heat")
        row_labels = [tables.nth(i).locator("tbody th").all_inner_texts() for i in (0, 1)]
        page.fill("#source", "")  # cleared: no stale output or map
        cleared = page.locator("table.heat").count(), page.inner_text("#output")
        note = page.inner_text("#note")
    assert text == expected(loaded, ["1 2 3"])[0][0]
    attention = httpx.post(f"{server.url}/attention", json={"segment": "1 2 3"}).json()
    assert rows == len(attention["target"]) and columns == 4 + 1  # 3 tokens + EOS, + corner cell
    want = [w[0] for w in expected(loaded, ["1 2 3", "4 5 6 7"])]
    assert lines == want
    for line, (shown, caption, labels) in enumerate(zip(lines, captions, row_labels, strict=True), 1):
        assert caption == f'line {line}: attention while writing "{shown}"'
        assert labels == [*shown.split(), "</s>"]  # the map's rows are the output shown
    assert cleared == (0, "") and note == ""  # the torch engine: no word about missing attention


def test_serving_with_a_shortlist_equals_decoding_with_it(checkpoint, tmp_path):
    from transduce.data.dataset import Dataset
    from transduce.decode.shortlist import build_shortlist

    train = Dataset(checkpoint / "data").splits["train"]
    loaded = load_model(checkpoint)
    sizes = len(loaded.src_vocab), len(loaded.tgt_vocab)
    listed = build_shortlist((train.pair(i) for i in range(len(train))), *sizes, per_token=1, frequent=2)
    sources = [loaded.src_vocab.encode(s) if s.strip() else [] for s in SEGMENTS]
    hyps = decode_all(loaded.model, sources, loaded.config.decode, shortlist=listed)
    want = [loaded.tgt_vocab.decode(h[0].tokens) if h else "" for h in hyps]
    server = Server(create_app(loaded, shortlist=listed))
    try:
        response = httpx.post(f"{server.url}/translate", json={"segments": SEGMENTS})
        assert response.status_code == 200, response.text
        assert [t["text"] for t in response.json()["translations"]] == want
    finally:
        server.stop()
    build_shortlist([([3], [3])], 5, 5).save(tmp_path / "wrong")
    refused = CliRunner().invoke(cli, ["serve", str(checkpoint), "--shortlist", str(tmp_path / "wrong")])
    assert refused.exit_code == 2 and refused.output.startswith("error: --shortlist: the shortlist is for")
    assert refused.output.count("\n") == 1
