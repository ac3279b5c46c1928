"""LibreTranslate's clients from PyPI, unchanged, against `transduce serve`'s compatible API on
loopback: each translates (as our own /translate does), lists the languages and gets a clean
error for a target the server does not translate into. libretranslatepy posts forms,
deep-translator puts its fields in the query string, libretranslate-aio posts forms with httpx
(and `q` as a list: repeated fields)."""

import urllib.error

import httpx
import pytest
from serving import Server
from tiny import train_tiny

from transduce.serve import Limits, create_app
from transduce.store.languages import Languages
from transduce.store.load import load_model

LINES = ["1 2 3", "4 5 6 7"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server on loopback with a key, and our own /translate's answers for LINES."""
    loaded = load_model(train_tiny(tmp_path_factory.mktemp("clients") / "run", 30))
    app = create_app(
        loaded, Limits(max_wait_ms=20), api_key="secret", languages=Languages((("en", "de"),), "test")
    )
    with Server(app) as server:
        answer = httpx.post(
            f"{server.url}/translate", json={"segments": LINES}, headers={"X-API-Key": "secret"}
        )
        yield f"{server.url}/libretranslate/", [t["text"] for t in answer.json()["translations"]]


def test_libretranslatepy(served):
    api = pytest.importorskip("libretranslatepy")
    url, want = served
    client = api.LibreTranslateAPI(url, api_key="secret")
    assert [client.translate(line, "en", "de") for line in LINES] == want
    assert [lang["code"] for lang in client.languages()] == ["de", "en"]
    with pytest.raises(urllib.error.HTTPError) as bad:
        client.translate(LINES[0], "en", "fr")
    assert bad.value.code == 400 and b"fr is not supported" in bad.value.read()
    with pytest.raises(urllib.error.HTTPError) as wrong:
        api.LibreTranslateAPI(url, api_key="guess").translate(LINES[0], "en", "de")
    assert wrong.value.code == 403


def test_deep_translator(served):
    deep = pytest.importorskip("deep_translator")
    from deep_translator.exceptions import LanguageNotSupportedException, ServerException

    url, want = served
    client = deep.LibreTranslator(source="en", target="de", api_key="secret", custom_url=url)
    assert client.translate(LINES[0]) == want[0]
    assert client.translate_batch(LINES) == want
    # its language list is its own table of LibreTranslate's languages, not asked of the server
    assert {"en", "de"} <= set(client.get_supported_languages(as_dict=True).values())
    with pytest.raises(ServerException):  # fr is in its table; the server answers 400
        deep.LibreTranslator(source="en", target="fr", api_key="secret", custom_url=url).translate(LINES[0])
    with pytest.raises(LanguageNotSupportedException):  # refused before asking the server
        deep.LibreTranslator(source="en", target="xx", api_key="secret", custom_url=url)


def test_libretranslate_aio(served):
    aio = pytest.importorskip("libretranslate_aio")
    url, want = served
    with aio.LibreTranslate(url, api_key="secret") as client:
        assert client.translate(LINES, "en", "de").translated_text == want
        assert client.translate(LINES[0], "auto", "de").detected_language.language == "en"
        assert [(lang.code, lang.targets) for lang in client.languages()] == [
            ("de", ["de"]),
            ("en", ["de", "en"]),
        ]
        with pytest.raises(aio.BadRequestError, match="fr is not supported"):
            client.translate(LINES[0], "en", "fr")
    with aio.LibreTranslate(url, api_key="guess") as client, pytest.raises(aio.ForbiddenError):
        client.translate(LINES[0], "en", "de")
