"""The server's request bodies cannot drift from DecodeConfig or from `translate`'s options: every
decoding setting is in the API with DecodeConfig's bounds (or the server's stated stricter ones),
or is listed as left out, with the reason."""

from typer.main import get_command

from transduce.cli import app
from transduce.config import DecodeConfig
from transduce.serve.schema import NOT_IN_API, RENAMED, SERVER_BOUNDS, AttentionRequest, TranslateRequest


def command_options(name: str) -> set[str]:
    """The parameter names of a `transduce` command."""
    command = get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name for p in command.params if p.name}


def bounds(schema: dict) -> dict[str, float]:
    """A field's numeric bounds in a JSON schema (its non-null branch)."""
    branch = next((b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"), schema)
    return {k: branch[k] for k in ("minimum", "maximum", "exclusiveMinimum") if k in branch}


def test_every_decode_config_field_is_in_the_request_or_left_out_with_a_reason():
    missing = set(DecodeConfig.model_fields) - set(TranslateRequest.model_fields) - set(NOT_IN_API)
    assert not missing, f"DecodeConfig fields neither in TranslateRequest nor in NOT_IN_API: {missing}"
    assert all(reason.strip() for reason in NOT_IN_API.values())


def test_every_decoding_option_of_translate_is_in_the_api_or_left_out_with_a_reason():
    served_by_the_server = command_options("serve")  # --threads, --device, ...: for every request
    api = set(TranslateRequest.model_fields)
    missing = {
        name
        for name in command_options("translate")
        if RENAMED.get(name, name) not in api and name not in NOT_IN_API and name not in served_by_the_server
    }
    assert not missing, f"`translate` options neither in the API nor in NOT_IN_API: {missing}"
    assert {"max_len_a", "max_len_b", "min_len", "prefixes", "greedy"} <= api


def test_nothing_is_left_out_that_is_not_an_option():
    """An entry of NOT_IN_API or RENAMED names a DecodeConfig field or a `translate` option."""
    known = set(DecodeConfig.model_fields) | command_options("translate")
    assert set(NOT_IN_API) <= known and set(RENAMED) <= known
    assert not set(NOT_IN_API) & set(TranslateRequest.model_fields)


def test_the_bounds_are_decode_configs_or_the_servers_stated_stricter_ones():
    config = DecodeConfig.model_json_schema()["properties"]
    for model in (TranslateRequest, AttentionRequest):
        request = model.model_json_schema()["properties"]
        for name in set(DecodeConfig.model_fields) & set(request):
            want = bounds(config[name])
            if name in SERVER_BOUNDS:
                want["maximum"] = min(want.get("maximum", SERVER_BOUNDS[name]), SERVER_BOUNDS[name])
            assert bounds(request[name]) == want, name
            assert request[name]["description"].startswith(config[name]["description"]), name
    assert bounds(TranslateRequest.model_json_schema()["properties"]["seed"])["maximum"] == 2**32 - 1
