"""Load test of `transduce serve` on loopback: N concurrent clients for M seconds.

    python -m bench.serve.load                    # 16 clients, 20 s, batching on then off
    python -m bench.serve.load --engines torch ctranslate2
    python -m bench.serve.load --apis transduce libretranslate --engines ctranslate2 --batching on --rounds 6

The server runs in its own process on a `small`-preset model trained 300 updates on the reverse
task (about 7 CPU minutes, once): not accurate, but its outputs end near the source's length, as
a real model's do. The model of 20 updates used before 2026-11-27's fourth session never emitted
EOS, so every output ran to the length limit (|x| + 50: 4-5x a real request's steps) and every
CTranslate2 call cut and rescored each output at its own limit. Each client sends one
segment of 8-16 symbols per request, greedy, and waits for the answer before the next.
Records errors, p50/p99 latency and segments/s with dynamic batching on and off, on each of
--engines (`serve --engine`; default torch only), in bench/records/serve/serving-<date>.json.

--apis libretranslate sends the same segments to the LibreTranslate-compatible API instead
(`POST /libretranslate/translate`, a form as most of its clients post: q, source, target), with
the server given languages for the reverse model (--source-lang xx --target-lang yy); that API
has no search settings, so every API is then measured at the checkpoint's (beam 4, not greedy)
and the record is serving-apis-<date>.json. The APIs take turns on one server (--rounds rounds of
--seconds / --rounds each), so that the machine's other load falls on each alike.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.records import BENCH, host_line, write_record

OUT = BENCH / "out" / "serve"


LANGUAGES = ("--source-lang", "xx", "--target-lang", "yy")  # codes for the reverse task's two sides
LOAD_MODEL_STEPS = 300  # enough for the outputs to end near the source's length (see the top)
LATENCY_MODEL_STEPS = 20  # the latency test's long segments run to the length limit anyway


def model_dir(steps: int = LATENCY_MODEL_STEPS) -> Path:
    """The `small` model trained `steps` updates on `reverse` (built once): LATENCY_MODEL_STEPS for
    the latency test, LOAD_MODEL_STEPS for the load test."""
    run = OUT / ("model" if steps == LATENCY_MODEL_STEPS else f"model-{steps}")
    if not (run / "checkpoints").exists():
        from transduce.config import load_config
        from transduce.train.trainer import Trainer

        cfg = load_config(
            "small",
            [
                "data.task=reverse",
                "data.task_train_size=2000",
                f"train.steps={steps}",
                f"train.save_every={steps}",
                f"train.validate_every={steps}",
                "data.task_eval_size=10",
            ],
        )
        Trainer(cfg, run, show_progress=False).fit()
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    run: Path,
    port: int,
    batching: bool,
    threads: int,
    env: dict[str, str] | None = None,
    engine: str = "torch",
    extra: tuple[str, ...] = (),
) -> subprocess.Popen:
    """`transduce serve` in its own process, once it answers /health; `env` can point it at
    another source tree (PYTHONPATH) to compare versions."""
    cmd = [
        sys.executable,
        "-m",
        "transduce",
        "serve",
        str(run),
        "--port",
        str(port),
        "--threads",
        str(threads),
        "--engine",
        engine,
        *extra,
    ]
    if not batching:
        cmd.append("--no-batching")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def request(api: str, segment: str, greedy: bool) -> dict:
    """httpx.post's arguments for one segment on `api`."""
    if api == "libretranslate":
        return {"url": "/libretranslate/translate", "data": {"q": segment, "source": "xx", "target": "yy"}}
    return {"url": "/translate", "json": {"segments": [segment], **({"beam": 1} if greedy else {})}}


async def client(
    url: str, api: str, greedy: bool, seconds: float, seed: int, latencies: list[float], errors: list[str]
) -> None:
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        while time.monotonic() < end:
            segment = " ".join(str(rng.randrange(10)) for _ in range(rng.randint(8, 16)))
            begin = time.monotonic()
            try:
                r = await http.post(**request(api, segment, greedy))
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:80]}")
                    continue
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
                continue
            latencies.append(time.monotonic() - begin)


def measure(
    run: Path, batching: bool, engine: str, apis: list[str], args: argparse.Namespace, greedy: bool
) -> list[dict]:
    """One server; per API its clients for --seconds in all, the APIs taking turns in --rounds
    rounds, so that a change in the machine's other load falls on each alike."""
    port = free_port()
    proc = start_server(run, port, batching, args.threads, engine=engine, extra=LANGUAGES)
    found = {api: {"latencies": [], "errors": [], "wall": 0.0} for api in apis}
    try:
        url = f"http://127.0.0.1:{port}"
        seconds = args.seconds / args.rounds
        for _, api in itertools.product(range(args.rounds), apis):
            latencies, errors = found[api]["latencies"], found[api]["errors"]

            async def everyone(api: str = api, latencies: list = latencies, errors: list = errors) -> None:
                await asyncio.gather(
                    *(client(url, api, greedy, seconds, i, latencies, errors) for i in range(args.clients))
                )

            begin = time.monotonic()
            asyncio.run(everyone())
            found[api]["wall"] += time.monotonic() - begin
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return [summary(api, engine, batching, **found[api]) for api in apis]


def summary(
    api: str, engine: str, batching: bool, latencies: list[float], errors: list[str], wall: float
) -> dict:
    ordered = sorted(latencies)
    return {
        "api": api,
        "engine": engine,
        "batching": batching,
        "requests": len(latencies),
        "errors": len(errors),
        "p50_ms": 1000 * statistics.median(ordered) if ordered else float("nan"),
        "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("nan"),
        "segments_per_s": len(latencies) / wall,
    }


def write_results(rows: list[dict], args: argparse.Namespace) -> None:
    """serving-<date>.json; serving-apis-<date>.json where the LibreTranslate API was measured."""
    apis = "libretranslate" in args.apis
    search = "the checkpoint's beam search (beam 4)" if apis else "greedy"
    write_record(
        "serve",
        "serving-apis" if apis else "serving",
        title="Serving load test"
        + (": our /translate and the LibreTranslate-compatible API" if apis else ""),
        command=f"python -m bench.serve.load --clients {args.clients} --seconds {args.seconds} "
        f"--threads {args.threads} --engines {' '.join(args.engines)}"
        + (
            f" --apis {' '.join(args.apis)} --batching {args.batching} --rounds {args.rounds}" if apis else ""
        ),
        host=host_line(args.threads),
        setup=(
            f"`transduce serve` with {args.threads} thread(s) on the `small` preset (d 256, 3+3 layers, "
            f"{LOAD_MODEL_STEPS} updates on reverse), {search}; {args.clients} closed-loop clients on "
            "loopback, one 8-16 symbol segment per request"
            + ("; LibreTranslate's as a form (q, source, target)." if apis else ".")
        ),
        rows=[
            {
                **({"api": r["api"]} if apis else {}),
                "engine": r["engine"],
                "batching": r["batching"],
                "requests": r["requests"],
                "errors": r["errors"],
                "p50_ms": round(r["p50_ms"]),
                "p99_ms": round(r["p99_ms"]),
                "segments_per_s": round(r["segments_per_s"], 1),
            }
            for r in rows
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--engines", nargs="+", default=["torch"], choices=["torch", "ctranslate2"], help="serve --engine"
    )
    parser.add_argument(
        "--apis",
        nargs="+",
        default=["transduce"],
        choices=["transduce", "libretranslate"],
        help="what to ask",
    )
    parser.add_argument("--batching", choices=["on", "off", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1, help="turns the APIs take, --seconds in all each")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    run = model_dir(LOAD_MODEL_STEPS)
    greedy = "libretranslate" not in args.apis  # the LibreTranslate API has no search settings
    batchings = {"on": [True], "off": [False], "both": [True, False]}[args.batching]
    rows = [
        row
        for engine in args.engines
        for batching in batchings
        for row in measure(run, batching, engine, args.apis, args, greedy)
    ]
    for r in rows:
        print(r)
    write_results(rows, args)


if __name__ == "__main__":
    main()
