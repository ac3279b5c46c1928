"""The server's bounds on work: budgets, turn-taking between requests, deadlines, disconnects."""

import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from ports import free_port
from serving import Server
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app as cli
from transduce.decode.torch_engine import TorchEngine, decode_all
from transduce.serve import Limits, create_app
from transduce.store.load import load_model

DECODE_S = 0.3  # each decode call made this slow, so a request spans several calls
LARGE = [" ".join(str((i + j) % 9 + 1) for j in range(5)) for i in range(8)]  # 8 segments, 6 tokens with EOS


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return load_model(train_tiny(tmp_path_factory.mktemp("limits") / "run", 30))


@pytest.fixture
def calls(monkeypatch):
    """The torch engine's decode made slow and recorded: the sources of each call, in call order."""
    real = TorchEngine.decode
    log: list[list[list[int]]] = []

    def slow(engine, request):
        log.append([list(s) for s in request.sources])
        time.sleep(DECODE_S)
        return real(engine, request)

    monkeypatch.setattr(TorchEngine, "decode", slow)
    return log


def post_in_background(url, body, results, timeout=30.0):
    def send():
        try:
            results.append(httpx.post(url, json=body, timeout=timeout))
        except httpx.HTTPError as exc:
            results.append(exc)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def wait_until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def texts(loaded, segments, beam):
    cfg = loaded.config.decode.model_copy(update={"beam": beam, "nbest": 1})
    hyps = decode_all(loaded.model, [loaded.src_vocab.encode(s) for s in segments], cfg)
    return [loaded.tgt_vocab.decode(h[0].tokens) if h else "" for h in hyps]


@pytest.mark.parametrize("small_beam", [1, 2])  # the large request's options, or others
def test_a_small_request_takes_its_turn_between_the_calls_of_a_large_one(loaded, calls, small_beam):
    limits = Limits(max_batch_tokens=6, max_request_tokens=48, max_wait_ms=0)
    small = "7 7"
    with Server(create_app(loaded, limits)) as server:
        url = f"{server.url}/translate"
        large_result: list = []
        large = post_in_background(url, {"segments": LARGE, "beam": 1}, large_result)
        wait_until(lambda: len(calls) >= 1)
        started = len(calls)
        reply = httpx.post(url, json={"segments": [small], "beam": small_beam}, timeout=30)
        answered_first = large.is_alive()  # >= 6 more slowed calls were still to come
        large.join(timeout=30)
    assert reply.status_code == 200 and large_result[0].status_code == 200
    small_call = next(i for i, c in enumerate(calls) if loaded.src_vocab.encode(small) in c)
    assert small_call <= started + 1, (small_call, started)  # not behind the large request's rest
    assert len(calls) == len(LARGE) + 1 and small_call < len(calls) - 1
    assert answered_first
    assert [t["text"] for t in large_result[0].json()["translations"]] == texts(loaded, LARGE, 1)
    assert reply.json()["translations"][0]["text"] == texts(loaded, [small], small_beam)[0]


def test_small_requests_arriving_while_a_small_call_is_young_share_the_next_call(loaded, calls):
    """Under a load of small requests the arrivals wait for the young call in progress and go
    into one call together, rather than each group starting a call beside it (which halved the
    load test's segments a second)."""
    with Server(create_app(loaded, Limits(max_wait_ms=0))) as server:
        url = f"{server.url}/translate"
        results: list = []
        first = post_in_background(url, {"segments": ["1 2"], "beam": 1}, results)
        wait_until(lambda: len(calls) >= 1)
        later = [post_in_background(url, {"segments": [s], "beam": 1}, results) for s in ("3 4", "5 6")]
        for thread in [first, *later]:
            thread.join(timeout=30)
    assert [r.status_code for r in results] == [200, 200, 200]
    encoded = [loaded.src_vocab.encode(s) for s in ("3 4", "5 6")]
    assert len(calls) == 2 and sorted(calls[1]) == sorted(encoded), calls


def test_a_small_request_is_decoded_beside_a_long_call_not_after_it(loaded):
    """One segment held to 2000 output tokens is one call of seconds that cannot be split; a
    small request sent meanwhile is answered while it still runs, in under half of what the long
    call had left, the two taking turns between decoding steps. Both times are measured from the
    small request's sending, so that a loaded machine slows both sides of the comparison."""
    app = create_app(loaded)
    with Server(app) as server:
        url = f"{server.url}/translate"
        long_result: list = []
        long_body = {"segments": ["1 2 3 4 5"], "beam": 4, "min_len": 2000, "max_len_b": 2000}
        long = post_in_background(url, long_body, long_result, timeout=120)
        wait_until(lambda: app.state.batcher.batches == 1)
        time.sleep(0.3)  # the long call is under way
        sent = time.monotonic()
        small = httpx.post(url, json={"segments": ["7 7"], "beam": 1, "max_len_b": 2}, timeout=120)
        small_took = time.monotonic() - sent
        long_still_running = long.is_alive()
        long.join(timeout=120)
        long_left = time.monotonic() - sent
    assert small.status_code == 200 and long_result[0].status_code == 200
    assert long_still_running and small_took < long_left / 2, (small_took, long_left)
    assert len(long_result[0].json()["translations"][0]["text"].split()) == 2000
    assert app.state.batcher.turns.handovers > 0


def test_requests_over_their_budget_are_413_and_at_it_are_decoded(loaded):
    limits = Limits(max_batch_tokens=12, max_request_tokens=24)
    with Server(create_app(loaded, limits)) as server:
        url = f"{server.url}/translate"
        at_budget = httpx.post(url, json={"segments": ["1 2 3 4 5"] * 4, "beam": 1}, timeout=30)
        assert at_budget.status_code == 200, at_budget.text
        over = httpx.post(url, json={"segments": ["1 2 3 4 5"] * 5, "beam": 1})
        assert over.status_code == 413 and "30 source tokens x beam; at most 24" in over.json()["detail"]
        wide = httpx.post(url, json={"segments": ["1 2 3 4 5"], "beam": 3})
        assert wide.status_code == 413, wide.text
        assert "5 tokens at beam 3 is 18" in wide.json()["detail"] and "at most 12" in wide.json()["detail"]
        attention = httpx.post(f"{server.url}/attention", json={"segment": "1 2 3 4 5 6 7 8 9 1 2 3"})
        assert attention.status_code == 413
        empty = httpx.post(url, json={"segments": ["", " "] * 4, "beam": 4})
        assert empty.status_code == 200 and empty.json()["translations"][0]["text"] == ""


def test_a_disconnected_clients_queued_work_is_dropped(loaded, calls):
    limits = Limits(max_batch_tokens=6, max_request_tokens=48, max_wait_ms=0)
    app = create_app(loaded, limits)
    batcher = app.state.batcher
    with Server(app) as server:
        url = f"{server.url}/translate"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json={"segments": LARGE, "beam": 1}, timeout=2 * DECODE_S)
        wait_until(lambda: batcher.dropped == 1, seconds=5)
        made = len(calls)
        time.sleep(3 * DECODE_S)
        assert len(calls) == made <= 4 and not batcher.line and batcher.queued_work() == 0
        after = httpx.post(url, json={"segments": ["1 2"], "beam": 1}, timeout=30)
        assert after.status_code == 200


def test_a_request_past_its_timeout_is_503_and_its_work_dropped(loaded, calls):
    limits = Limits(max_batch_tokens=6, max_request_tokens=48, max_wait_ms=0, request_timeout=2 * DECODE_S)
    app = create_app(loaded, limits)
    with Server(app) as server:
        begin = time.monotonic()
        late = httpx.post(f"{server.url}/translate", json={"segments": LARGE, "beam": 1}, timeout=30)
        elapsed = time.monotonic() - begin
        time.sleep(2 * DECODE_S)
    assert late.status_code == 503 and "not decoded within 0.6 s" in late.json()["detail"]
    assert elapsed < len(LARGE) * DECODE_S  # not decoded to the end first
    assert len(calls) <= 4 and app.state.batcher.dropped == 1


def test_more_queued_work_than_max_queued_tokens_is_503(loaded, calls):
    limits = Limits(max_batch_tokens=6, max_request_tokens=48, max_queued_tokens=48, max_wait_ms=0)
    with Server(create_app(loaded, limits)) as server:
        url = f"{server.url}/translate"
        large_result: list = []
        large = post_in_background(url, {"segments": LARGE, "beam": 1}, large_result)
        wait_until(lambda: len(calls) >= 1)
        busy = httpx.post(url, json={"segments": ["1 2 3 4 5"] * 4, "beam": 1}, timeout=30)
        fits = httpx.post(url, json={"segments": ["1"], "beam": 1}, timeout=30)
        large.join(timeout=30)
        assert busy.status_code == 503 and "busy" in busy.json()["detail"]
        assert fits.status_code == 200 and large_result[0].status_code == 200
        again = httpx.post(url, json={"segments": ["1 2 3 4 5"] * 4, "beam": 1}, timeout=30)
        assert again.status_code == 200


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--max-segments", "-1", "--max-segments must be a positive integer, not -1"),
        ("--max-chars", "0", "--max-chars must be a positive integer"),
        ("--max-body-bytes", "0", "--max-body-bytes must be a positive integer"),
        ("--max-request-tokens", "-5", "--max-request-tokens must be a positive integer"),
        ("--max-batch-tokens", "0", "--max-batch-tokens must be a positive integer"),
        ("--max-queued-tokens", "100", "--max-queued-tokens (100) must be at least --max-request-tokens"),
        ("--request-timeout", "0", "--request-timeout must be a positive number of seconds"),
        ("--request-timeout", "nan", "--request-timeout must be a positive number of seconds"),
        ("--max-wait-ms", "-1", "--max-wait-ms must be a number >= 0"),
        ("--max-wait-ms", "inf", "--max-wait-ms must be a number >= 0"),
        ("--port", "70000", "--port must be in 0..65535"),
        ("--threads", "0", "--threads must be a positive integer"),
        ("--graceful-seconds", "-1", "--graceful-seconds must be a number >= 0"),
        ("--receive-timeout", "0", "--receive-timeout must be a positive number of seconds"),
        ("--receive-timeout", "inf", "--receive-timeout must be a positive number of seconds"),
    ],
)
def test_serve_refuses_bad_limits_at_start_with_one_error_line(tmp_path, option, value, says):
    result = CliRunner().invoke(cli, ["serve", str(tmp_path / "no-such-run"), option, value])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {says}") and result.output.count("\n") == 1, result.output


def slow_connection(port: int, first: bytes, trickle: bool, seconds: float) -> float:
    """Open a connection, send `first`, then (with `trickle`) one more byte every 0.1 s: the
    seconds until the server closed it, or `seconds` if it never did."""
    begin = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(first)
        sock.settimeout(0.1)
        while time.monotonic() - begin < seconds:
            try:
                if sock.recv(4096) == b"":
                    break
            except TimeoutError:
                pass
            except ConnectionError:
                break
            try:
                if trickle:
                    sock.sendall(b"1")
            except ConnectionError:
                break
        return min(time.monotonic() - begin, seconds)


SLOW = {  # what a slow client sends first; then a byte at a time
    "headers": (b"POST /translate HTTP/1.1\r\nHost: x\r\nX-Slow: ", True),
    "body": (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{", True),
    "nothing": (b"", False),
}


def test_slow_connections_are_closed_after_the_receive_timeout(loaded):
    """20 connections fed a byte at a time (headers or body) and 2 that send nothing are all
    closed about --receive-timeout after they opened, while other clients are answered; the
    time to decode and answer is not bounded by it."""
    with Server(create_app(loaded), receive_timeout=1.0) as server:
        kinds = [*["headers", "body"] * 10, "nothing", "nothing"]
        with ThreadPoolExecutor(len(kinds)) as pool:
            open_for = pool.map(lambda kind: slow_connection(server.port, *SLOW[kind], seconds=8.0), kinds)
            time.sleep(0.5)
            answered = httpx.post(f"{server.url}/translate", json={"segments": ["1 2 3"] * 8}, timeout=30)
            open_for = list(open_for)
    assert answered.status_code == 200, answered.text
    assert all(0.9 < t < 2.5 for t in open_for), dict(zip(kinds, open_for, strict=True))


@pytest.fixture
def port_in_use():
    """A loopback port another socket listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("127.0.0.1", "cannot listen on 127.0.0.1:{port}: Address already in use"),
        ("no-such-host.invalid", "cannot listen on no-such-host.invalid:{port}: "),
    ],
    ids=["port in use", "unresolvable host"],
)
def test_serve_refuses_an_address_it_cannot_listen_on_with_one_error_line(tmp_path, port_in_use, host, says):
    """Checked before the model loads (uvicorn itself would log the error and exit with 3)."""
    argv = ["serve", str(tmp_path / "no-such-run"), "--host", host, "--port", str(port_in_use)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    expected = f"error: {says.format(port=port_in_use)}"
    assert result.output.startswith(expected) and result.output.count("\n") == 1, result.output


def test_sigterm_mid_decode_exits_within_the_graceful_period(tmp_path):
    """A real `transduce serve` process, one decode call of ~20 s (every hypothesis is held to
    1000 tokens), SIGTERM a moment into it: the process must be gone about --graceful-seconds
    later, not when the decode ends."""
    run = train_tiny(tmp_path / "run", 5, "decode.min_len=1000", "decode.max_len_b=1000")
    port = free_port()
    big = "1000000"
    command = [sys.executable, "-m", "transduce", "serve", str(run), "--port", str(port), "--threads", "1"]
    command += ["--graceful-seconds", "1", "--max-request-tokens", big, "--max-batch-tokens", big]
    command += ["--max-queued-tokens", big]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _healthy(url), seconds=60)
        reply: list = []
        body = {"segments": ["1 2 3 4 5"] * 16, "beam": 32}
        client = post_in_background(f"{url}/translate", body, reply, timeout=60)
        wait_until(lambda: httpx.get(f"{url}/info", timeout=5).json()["batches_decoded"] == 1)
        time.sleep(0.5)
        assert not reply, "the decode finished before SIGTERM: make it longer"
        begin = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
        took = time.monotonic() - begin
        client.join(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert took < 1 + 4, took
    log = proc.stderr.read()
    assert code in (0, -signal.SIGTERM), log  # uvicorn re-raises the signal once it has shut down
    assert "Cancel 1 running task(s)" in log and "Traceback" not in log, log
    assert isinstance(reply[0], httpx.HTTPError) or reply[0].status_code == 503, reply


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
