"""The LibreTranslate-compatible API (/libretranslate) over real HTTP on loopback: a line comes back
as our own /translate gives it, however the request is sent (JSON, form, multipart, query
string); its languages, `auto`, html, alternatives; every bad request a LibreTranslate status
with an `error` field, never a 500; a multilingual model translates into the `target` asked."""

import httpx
import pytest
from serving import Server
from test_multilingual import PAIRS, corpus, prepare
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app as cli
from transduce.serve import Limits, create_app
from transduce.serve.markup import join_html, split_html
from transduce.store.languages import Languages
from transduce.store.load import load_model

API = "/libretranslate"
EN_DE = Languages((("en", "de"),), "test")
LINES = ["1 2 3", "4 5", "6 7 8 9"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return load_model(train_tiny(tmp_path_factory.mktemp("libre") / "run", 30))


@pytest.fixture(scope="module")
def served(loaded):
    limits = Limits(max_segments=8, max_chars=50, max_wait_ms=50, max_body_bytes=4096)
    with Server(create_app(loaded, limits, languages=EN_DE)) as server:
        yield server


@pytest.fixture(scope="module")
def keyed(loaded):
    with Server(create_app(loaded, Limits(max_wait_ms=50), api_key="secret", languages=EN_DE)) as server:
        yield server


def ours(server, segments, **options):
    """Our own /translate's texts for `segments`."""
    answer = httpx.post(f"{server.url}/translate", json={"segments": segments, **options})
    assert answer.status_code == 200, answer.text
    return [
        t["text"] if isinstance(t, dict) else [o["text"] for o in t] for t in answer.json()["translations"]
    ]


def sent(server, how, fields):
    """POST /libretranslate/translate with `fields` sent as JSON, a form, multipart or a query."""
    url = f"{server.url}{API}/translate"
    if how == "json":
        return httpx.post(url, json=fields)
    if how == "form":
        return httpx.post(url, data=fields)
    pairs = [(k, v) for k, vs in fields.items() for v in (vs if isinstance(vs, list) else [vs])]
    if how == "multipart":
        return httpx.post(url, files=[(k, (None, str(v))) for k, v in pairs])
    return httpx.post(url, params=pairs)


@pytest.mark.parametrize("how", ["json", "form", "multipart", "query"])
def test_a_text_or_a_list_comes_back_as_our_own_translate_gives_it(served, how):
    want = ours(served, LINES)
    one = sent(served, how, {"q": LINES[0], "source": "en", "target": "de"})
    assert one.status_code == 200, one.text
    assert one.json() == {"translatedText": want[0]}
    several = sent(served, how, {"q": LINES, "source": "en", "target": "de", "format": "text"})
    assert several.json() == {"translatedText": want}


def test_lines_are_segments_and_blank_lines_stay(served):
    want = ours(served, LINES)
    text = f"{LINES[0]}\n\n {LINES[1]}\r\n{LINES[2]}"
    got = sent(served, "json", {"q": text, "source": "en", "target": "de"}).json()["translatedText"]
    assert got == f"{want[0]}\n\n {want[1]}\n{want[2]}"


def test_languages_auto_and_identity(served):
    assert httpx.get(f"{served.url}{API}/languages").json() == [
        {"code": "de", "name": "German", "targets": ["de"]},
        {"code": "en", "name": "English", "targets": ["de", "en"]},
    ]
    auto = sent(served, "form", {"q": LINES[0], "source": "auto", "target": "DE"}).json()
    assert auto == {
        "translatedText": ours(served, LINES[:1])[0],
        "detectedLanguage": {"confidence": 100.0, "language": "en"},
    }
    assert sent(served, "json", {"q": LINES, "source": "en", "target": "en"}).json() == {
        "translatedText": LINES
    }


def test_html_keeps_the_markup_and_translates_the_text_between_tags(served):
    want = ours(served, LINES)
    markup = [
        '<p title="a&amp;b">',
        f'<script>var x = "{LINES[1]}";</script> <i>',
        f"</i><!-- {LINES[1]} --></p>",
    ]
    page = f"{markup[0]}{LINES[0]}{markup[1]}{LINES[2]}{markup[2]}"
    got = sent(served, "json", {"q": page, "source": "en", "target": "de", "format": "html"}).json()
    assert got["translatedText"] == f"{markup[0]}{want[0]}{markup[1]}{want[2]}{markup[2]}"


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("a &amp; b &lt;c&gt;", ["a & b <c>"]),
        ("<b>x</b>", ["x"]),
        ("x<br/>y", ["x", "y"]),
        ("1 < 2", ["1 < 2"]),
    ],
)
def test_text_runs_are_unescaped_and_escaped_again(html, text):
    pieces = split_html(html)
    assert [p.content for p in pieces if not p.markup] == text
    assert split_html(join_html(pieces)) == pieces


def test_alternatives_are_the_n_best_after_the_best(served):
    best = ours(served, LINES[:1], beam=3)[0]
    nbest = ours(served, LINES[:1], beam=3, nbest=3)[0]
    got = sent(served, "json", {"q": LINES[0], "source": "en", "target": "de", "alternatives": 2}).json()
    assert got["translatedText"] == best == nbest[0]
    assert got["alternatives"] == [t for t in dict.fromkeys(nbest[1:]) if t != best]


BAD = [  # name, fields as JSON (raw bytes: a form body; a pair: a content type and a body), status, error
    ("missing q", {"source": "en", "target": "de"}, 400, "missing q parameter"),
    ("empty q", {"q": "", "source": "en", "target": "de"}, 400, "missing q parameter"),
    ("q not text", {"q": 5, "source": "en", "target": "de"}, 400, "q must be a string or a list"),
    ("missing source", {"q": "1", "target": "de"}, 400, "missing source parameter"),
    ("missing target", {"q": "1", "source": "en"}, 400, "missing target parameter"),
    ("unknown target", {"q": "1", "source": "en", "target": "fr"}, 400, "fr is not supported"),
    ("unknown source", {"q": "1", "source": "fr", "target": "de"}, 400, "fr is not supported"),
    (
        "wrong format",
        {"q": "1", "source": "en", "target": "de", "format": "xml"},
        400,
        "xml format is not supported",
    ),
    ("alternatives", {"q": "1", "source": "en", "target": "de", "alternatives": "x"}, 400, "not a number"),
    (
        "too many alternatives",
        {"q": "1", "source": "en", "target": "de", "alternatives": 99},
        400,
        "must be <= 63",
    ),
    ("a long segment", {"q": "1 " * 30, "source": "en", "target": "de"}, 400, "at most 50"),
    ("many segments", {"q": ["1"] * 9, "source": "en", "target": "de"}, 400, "at most 8"),
    ("not an object", b"[1]", 400, "Invalid JSON format"),
    ("not JSON", b"{", 400, "Invalid JSON format"),
    ("a 10 MB q", b"q=" + b"1" * 10_000_000 + b"&source=en&target=de", 400, "over 4096 bytes"),
    # issue 87's sweep (2026-12-04): read as no fields, so "missing q" for a body that holds it
    (
        "JSON sent as text/plain",
        ("text/plain", b'{"q": "1", "source": "en", "target": "de"}'),
        400,
        "a body of type text/plain is not read: send the fields as JSON or a form",
    ),
    (
        "a multipart body without a boundary",
        ("multipart/form-data", b"q=1&source=en&target=de"),
        400,
        "multipart/form-data body without fields",
    ),
]


@pytest.mark.parametrize(("fields", "status", "says"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_request_is_a_libretranslate_status_with_an_error(served, fields, status, says):
    url = f"{served.url}{API}/translate"
    if isinstance(fields, dict):
        answer = httpx.post(url, json=fields)
    elif isinstance(fields, tuple):  # (content type, body)
        answer = httpx.post(url, content=fields[1], headers={"content-type": fields[0]})
    elif fields.startswith(b"q="):
        answer = httpx.post(
            url, content=fields, headers={"content-type": "application/x-www-form-urlencoded"}
        )
    else:
        answer = httpx.post(url, content=fields, headers={"content-type": "application/json"})
    assert (answer.status_code, set(answer.json())) == (status, {"error"}), answer.text
    assert says in answer.json()["error"]


KEYS = [  # how the key is sent, status
    ("none", {}, {}, 400),
    ("wrong in the body", {"api_key": "guess"}, {}, 403),
    ("wrong in the header", {}, {"X-API-Key": "guess"}, 403),
    ("in the body", {"api_key": "secret"}, {}, 200),
    ("in the header", {}, {"X-API-Key": "secret"}, 200),
]


@pytest.mark.parametrize(("field", "header", "status"), [k[1:] for k in KEYS], ids=[k[0] for k in KEYS])
def test_the_key_is_checked_as_libretranslate_checks_it(keyed, field, header, status):
    answer = httpx.post(
        f"{keyed.url}{API}/translate",
        data={"q": "1", "source": "en", "target": "de", **field},
        headers=header,
    )
    assert answer.status_code == status, answer.text
    assert ("error" in answer.json()) == (status != 200)
    assert httpx.get(f"{keyed.url}{API}/languages").status_code == 200  # as LibreTranslate: no key needed


def test_the_server_elsewhere_keeps_its_own_error_shape(served):
    assert httpx.get(f"{served.url}{API}/nothing").json() == {"error": "Not Found"}
    assert set(httpx.get(f"{served.url}/nothing").json()) == {"detail"}
    over = httpx.post(
        f"{served.url}/translate",
        content=b"{" + b" " * 5000 + b"}",
        headers={"content-type": "application/json"},
    )
    assert (over.status_code, set(over.json())) == (413, {"detail"})


SERVE_LANGUAGES = [  # serve's --source-lang and --target-lang that it cannot use: refused before it starts
    ("an empty source language (served as if not given)", ["--source-lang", ""], "--source-lang '': give a"),
    ("one language on both sides", ["--source-lang", "en", "--target-lang", "en"], "are both en"),
    ("a code that is no code", ["--source-lang", "e n", "--target-lang", "de"], "--source-lang 'e n'"),
]


@pytest.mark.parametrize(
    ("extra", "says"), [r[1:] for r in SERVE_LANGUAGES], ids=[r[0] for r in SERVE_LANGUAGES]
)
def test_serve_refuses_languages_it_cannot_use_in_one_line(loaded, monkeypatch, extra, says):
    """Issue 87's sweep (2026-12-04) found `--source-lang ""` served with the model's languages."""
    monkeypatch.setattr("transduce.serve.run_server", lambda app, listen: pytest.fail("it started serving"))
    result = CliRunner().invoke(cli, ["serve", str(loaded.path), "--port", "0", *extra])
    assert result.exit_code == 2 and result.output.count("error:") == 1, result.output
    assert says in result.output


def test_a_model_of_unknown_languages_says_how_to_name_them(loaded):
    with Server(create_app(loaded)) as server:  # a copy task: no dataset, no languages
        assert httpx.get(f"{server.url}{API}/languages").json() == []
        answer = httpx.post(f"{server.url}{API}/translate", data={"q": "1", "source": "en", "target": "de"})
        assert answer.status_code == 400 and "--source-lang and --target-lang" in answer.json()["error"]


def test_a_multilingual_model_translates_into_the_target_asked(tmp_path):
    root = corpus(tmp_path)
    assert (
        prepare(
            *[f"--pair=en-{t}={root / f'en-{t}'}" for t in PAIRS], "--vocab-size", "330", "-o", root / "data"
        ).exit_code
        == 0
    )
    overrides = [
        "model.d_model=32",
        "model.d_ff=64",
        "model.heads=2",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
    ]
    overrides += ["train.steps=4", "train.validate_every=4", f"data.dataset={root / 'data'}"]
    assert (
        CliRunner()
        .invoke(cli, ["train", "small", *overrides, "--run-dir", str(root / "run"), "--no-progress"])
        .exit_code
        == 0
    )
    with Server(create_app(load_model(root / "run"), Limits(max_wait_ms=10))) as server:
        listed = {lang["code"]: lang["targets"] for lang in httpx.get(f"{server.url}{API}/languages").json()}
        assert listed == {"de": ["de"], "en": ["de", "en", "fr"], "fr": ["fr"]}
        for target in ("de", "fr"):
            want = ours(server, ["the cat sat"], tgt_lang=target)
            got = sent(server, "form", {"q": "the cat sat", "source": "en", "target": target}).json()
            assert got == {"translatedText": want[0]}


def test_an_m2m100_model_is_told_both_languages(tmp_path):
    """An `import m2m100` checkpoint translates between any two of its language tokens: a request
    from en to de comes back as /translate gives it with src_lang and tgt_lang."""
    from test_m2m100 import TEXTS, make_m2m100

    from transduce.interop.m2m100 import import_m2m100

    make_m2m100(tmp_path / "hf")
    import_m2m100(tmp_path / "hf", tmp_path / "ours")
    with Server(create_app(load_model(tmp_path / "ours"), Limits(max_wait_ms=10))) as server:
        listed = {lang["code"]: lang["targets"] for lang in httpx.get(f"{server.url}{API}/languages").json()}
        assert len(listed) == 100 and {"de", "en", "fr"} <= set(listed["en"])
        for source, target in (("en", "de"), ("fr", "en")):
            want = ours(server, TEXTS[source], src_lang=source, tgt_lang=target)
            got = sent(server, "json", {"q": TEXTS[source], "source": source, "target": target})
            assert got.status_code == 200, got.text
            assert got.json() == {"translatedText": want}
