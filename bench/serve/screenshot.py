"""Serve a checkpoint with `transduce serve`, translate examples over HTTP and screenshot the page.

    python -m bench.serve.screenshot bench/out/mt/ours-small -o docs/serve_de.png \
        --text "Open the file in a new window."

Runs the real command line on a free loopback port, prints the /translate answers for
--examples (one per line, as Markdown table rows for the README) and drives the demo page in
headless Debian chromium (playwright) to save a screenshot with the attention heat map.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

EXAMPLES = [
    "Open File",
    "Save the current document",
    "The file could not be opened.",
    "Do you want to delete this folder?",
    "Show hidden files",
    "Connection to the server failed.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"transduce serve exited with status {server.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    sys.exit("transduce serve did not become healthy")


def screenshot(url: str, text: str, path: Path) -> str:
    """Type `text` into the page, wait for the heat map, save the page; returns the output shown."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Debian's chromium is needed: apt-get install chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 760})
            page.goto(url + "/")
            page.fill("#source", text)
            page.click("#translate")
            page.wait_for_selector("table.heat tbody tr", timeout=120000)
            shown = page.inner_text("#output")
            path.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(path), full_page=True)
        finally:
            browser.close()
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/serve_de.png"))
    parser.add_argument("--text", default="The file could not be opened.")
    parser.add_argument("--examples", nargs="*", default=EXAMPLES)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "transduce", "serve", str(args.checkpoint), "--port", str(port)]
    )
    try:
        wait_healthy(url, server)
        answer = httpx.post(
            url + "/translate", json={"segments": args.examples, "beam": 4}, timeout=300
        ).json()
        for src, hyp in zip(args.examples, answer["translations"], strict=True):
            print(f"| {src} | {hyp['text']} |")
        shown = screenshot(url, args.text, args.output)
        print(f"page: {args.text!r} -> {shown!r}; screenshot {args.output}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
