"""Latency of small requests to `transduce serve` while a maximal request is being decoded.

    python -m bench.serve.latency                          # this tree's server, 60 s
    python -m bench.serve.latency --large long             # 64 x 511 symbols at beam 1
    git archive bd40525 src | tar -x -C /tmp/before        # the server before turn-taking
    python -m bench.serve.latency --compare-src /tmp/before/src

One client sends the largest request the default limits admit again and again (--large beam4:
64 segments of 127 symbols at the model's beam 4; long: 64 segments of 511 symbols at beam 1;
either 32768 source tokens x beam, --max-request-tokens); meanwhile
a few closed-loop clients each send one 8-16 symbol segment with the default options (so they
can share decode calls with the large request) and wait for the answer. Records p50/p99 of
the small requests, with the same small requests on an idle server for reference
(bench/records/serve/serving-latency-<date>.json). The model is bench.serve.load's (the `small`
preset trained for a few steps); it never stops early, so every hypothesis runs to the length
limit: the worst case for a given budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time

import httpx

from bench.records import host_line, write_record
from bench.serve.load import OUT, free_port, model_dir, start_server

LARGE = {
    "beam4": {"segments": [" ".join(str(i % 10) for i in range(127))] * 64},
    "long": {"segments": [" ".join(str(i % 10) for i in range(511))] * 64, "beam": 1},
}
DESCRIBED = {"beam4": "64 segments x 127 symbols at beam 4", "long": "64 segments x 511 symbols at beam 1"}


async def small_client(
    url: str, stop: asyncio.Event, seed: int, latencies: list[float], errors: list[str]
) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=120) as http:
        while not stop.is_set():
            segment = " ".join(str(rng.randrange(10)) for _ in range(rng.randint(8, 16)))
            begin = time.monotonic()
            r = await http.post(url, json={"segments": [segment]})
            if r.status_code == 200:
                latencies.append(time.monotonic() - begin)
            else:
                errors.append(f"{r.status_code} {r.text[:80]}")


async def large_client(
    url: str, body: dict, stop: asyncio.Event, durations: list[float], errors: list[str]
) -> None:
    async with httpx.AsyncClient(timeout=300) as http:
        while not stop.is_set():
            begin = time.monotonic()
            r = await http.post(url, json=body)
            if r.status_code == 200:
                durations.append(time.monotonic() - begin)
            else:
                errors.append(f"large: {r.status_code} {r.text[:80]}")


async def load(url: str, clients: int, seconds: float, large_body: dict | None) -> dict:
    stop = asyncio.Event()
    small: list[float] = []
    large: list[float] = []
    errors: list[str] = []
    tasks = [asyncio.create_task(small_client(url, stop, i, small, errors)) for i in range(clients)]
    if large_body is not None:
        tasks.append(asyncio.create_task(large_client(url, large_body, stop, large, errors)))
        await asyncio.sleep(1.0)  # the large request is being decoded before small ones count
        small.clear()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)  # in-flight requests finish; at most one more each
    ordered = sorted(small)
    return {
        "small": len(small),
        "errors": len(errors),
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))],
        "large": len(large),
        "large_s": statistics.median(large) if large else float("nan"),
    }


def measure(src: str | None, clients: int, seconds: float, threads: int, large: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=src) if src else None
    port = free_port()
    proc = start_server(model_dir(), port, True, threads, env)
    url = f"http://127.0.0.1:{port}/translate"
    try:
        idle = asyncio.run(load(url, clients, min(seconds, 10.0), None))
        busy = asyncio.run(load(url, clients, seconds, LARGE[large]))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    label = f"before (`{src}`)" if src else "this tree"
    return [dict(idle, server=label, load="idle"), dict(busy, server=label, load="maximal request running")]


def write_results(rows: list[dict], args: argparse.Namespace) -> None:
    command = f"python -m bench.serve.latency --clients {args.clients} --seconds {args.seconds}"
    command += f" --threads {args.threads} --large {args.large}" + (
        f" --compare-src {args.compare_src}" if args.compare_src else ""
    )
    write_record(
        "serve",
        "serving-latency" + ("" if args.large == "beam4" else f"-{args.large}"),
        title="Serving: small requests under a maximal one",
        command=command,
        host=host_line(args.threads),
        setup=(
            f"`transduce serve` defaults with {args.threads} torch thread(s) on the `small` preset, beam 4. "
            f"Large: {DESCRIBED[args.large]} (32768 source tokens x beam), sent back to back; small: "
            f"{args.clients} closed-loop clients, one 8-16 symbol segment each."
        ),
        rows=[
            {
                "server": r["server"],
                "load": r["load"],
                "small_requests": r["small"],
                "errors": r["errors"],
                "p50_ms": round(r["p50_ms"]),
                "p99_ms": round(r["p99_ms"]),
                "large_requests": r["large"],
                "large_s": round(r["large_s"], 1) if r["large"] else None,
            }
            for r in rows
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--large", choices=sorted(LARGE), default="beam4", help="the maximal request sent")
    parser.add_argument("--compare-src", help="also measure the server from this source tree (PYTHONPATH)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.compare_src:
        rows += measure(args.compare_src, args.clients, args.seconds, args.threads, args.large)
    rows += measure(None, args.clients, args.seconds, args.threads, args.large)
    for r in rows:
        print(r)
    write_results(rows, args)


if __name__ == "__main__":
    main()
