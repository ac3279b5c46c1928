"""LibreTranslate itself serving our exported .argosmodel, offline: its API and its web page.

    python -m bench.serve.libretranslate --checkpoint RUN [--lines 200] [--screenshot docs/libretranslate.png]

Exports RUN as an .argosmodel, then, in a network namespace with loopback only (`unshare -rn`;
the script runs its own second half there), installs it into a private home with LibreTranslate's
Argos Translate (argos-translate-lt), starts `libretranslate --load-only en,de
--disable-files-translation` on loopback, translates --lines lines of the l10n test set through
its /translate, lists /languages, and screenshots its web page in headless Debian chromium with a
line typed in. The same lines go through that Argos Translate's own `translate` with
LibreTranslate's post-processing (`improve_translation_formatting`: the source's last
punctuation mark, lower case for a lower-case source); the record says how many of LibreTranslate's
answers equal them, how long it took to start and what it printed about models.

LibreTranslate 1.9.6 has no switch that keeps it from looking for models at start-up: `boot()`
(libretranslate/init.py) updates the package index and downloads packages and MiniSBD models
whenever fewer than two packages are installed (--update-models and --force-update-models only
add reasons to). With our one package it tries, fails (offline: no network here), prints "Cannot
update models (normal if you're offline)" and serves; nothing is downloaded. LibreTranslate runs in
its own venv, bench/.libretranslate: the CPU torch==2.13.0 first, then libretranslate==1.9.6.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.peers.venv import TORCH, ensure_venv
from bench.records import BENCH, host_line, write_record
from bench.serve.argos import TEST, export, offline, private_home

LIBRETRANSLATE = BENCH / ".libretranslate"
LT_PACKAGES = ["libretranslate==1.9.6"]
EXAMPLE = "Open the file in a new window"
# What LibreTranslate's start-up prints about models (libretranslate/init.py), download lines included
ABOUT_MODELS = ("Updating", "Cannot update", "Found", "Keep", "Downloading", "Loaded support")

# Run by LibreTranslate's Python: install the package; each line as its Argos translates it, and
# as LibreTranslate's /translate post-processes that.
DIRECT = """
import json, sys
from html import unescape
from argostranslate import package, translate
from libretranslate.language import improve_translation_formatting
package.install_from_path(sys.argv[1])
lines = json.load(sys.stdin)
raw = [translate.translate(line, "en", "de") for line in lines]
print(json.dumps([unescape(improve_translation_formatting(l, r)) for l, r in zip(lines, raw)]))
"""


def ensure_libretranslate(venv: Path = LIBRETRANSLATE) -> Path:
    """The Python of LibreTranslate's own venv, created on first use (torch kept at ours)."""
    return ensure_venv(venv, [TORCH, *LT_PACKAGES])


def start(python: Path, home: Path, port: int, log: Path) -> tuple[subprocess.Popen, float]:
    """`libretranslate` on loopback once its /languages answers; the seconds that took."""
    cmd = [str(python.parent / "libretranslate"), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--load-only", "en,de", "--disable-files-translation"]
    cmd += ["--frontend-language-source", "en", "--frontend-language-target", "de"]
    begin = time.monotonic()
    server = subprocess.Popen(cmd, env=private_home(home), stdout=log.open("w"), stderr=subprocess.STDOUT)
    while time.monotonic() - begin < 600:
        if server.poll() is not None:
            raise RuntimeError(f"libretranslate exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/languages", timeout=2).status_code == 200:
                return server, time.monotonic() - begin
        except httpx.TransportError:
            time.sleep(1)
    server.kill()
    raise RuntimeError("libretranslate did not answer in 600 s")


def screenshot(url: str, text: str, path: Path) -> str:
    """Type `text` into LibreTranslate's page, wait for its translation, save the page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 700})
        page.goto(url)
        page.fill("#textarea1", text)
        page.wait_for_function("document.querySelector('#textarea2').value.length > 0", timeout=60_000)
        shown = page.input_value("#textarea2")
        page.screenshot(path=str(path))
        browser.close()
    return shown


def inside(args: argparse.Namespace) -> None:
    """The half that runs in the network namespace: results as JSON in --result."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    python = LIBRETRANSLATE / "bin" / "python"
    lines = args.src.read_text(encoding="utf-8").split("\n")[: args.lines]
    with tempfile.TemporaryDirectory() as tmp:
        home, log = Path(tmp) / "home", Path(tmp) / "libretranslate.log"
        install = "import sys; from argostranslate import package; package.install_from_path(sys.argv[1])"
        subprocess.run([str(python), "-c", install, str(args.package)], env=private_home(home), check=True)
        server, seconds = start(python, home, 5077, log)
        try:
            url = "http://127.0.0.1:5077"
            answers = [
                httpx.post(
                    f"{url}/translate", json={"q": line, "source": "en", "target": "de"}, timeout=120
                ).json()
                for line in lines
            ]
            languages = httpx.get(f"{url}/languages").json()
            shown = screenshot(url, EXAMPLE, args.screenshot)
        finally:
            server.terminate()
            server.wait(timeout=30)
        printed = log.read_text(encoding="utf-8", errors="replace").splitlines()
        with tempfile.TemporaryDirectory() as other:
            direct = subprocess.run(
                [str(python), "-c", DIRECT, str(args.package)],
                input=json.dumps(lines),
                capture_output=True,
                text=True,
                env=private_home(Path(other)),
                check=True,
            )
    found = {
        "lines": lines,
        "answers": answers,
        "direct": json.loads(direct.stdout.splitlines()[-1]),
        "languages": languages,
        "start_seconds": round(seconds, 1),
        "model_lines": [line for line in printed if line.startswith(ABOUT_MODELS)],
        "page_shows": shown,
    }
    args.result.write_text(json.dumps(found, ensure_ascii=False), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, help="an English->German run or checkpoint")
    parser.add_argument("--src", type=Path, default=TEST)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--screenshot", type=Path, default=Path("docs/libretranslate.png"))
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--package", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args)
        return
    if not offline():
        sys.exit("needs `unshare -rn` (a network namespace) to run LibreTranslate offline")
    ensure_libretranslate()
    with tempfile.TemporaryDirectory() as tmp:
        package, result = Path(tmp) / "en_de.argosmodel", Path(tmp) / "result.json"
        export(args.checkpoint, package)
        me = [sys.executable, "-m", "bench.serve.libretranslate", "--inside", "--package", str(package)]
        me += ["--result", str(result), "--src", str(args.src), "--lines", str(args.lines)]
        subprocess.run([*offline(), *me, "--screenshot", str(args.screenshot.resolve())], check=True)
        found = json.loads(result.read_text(encoding="utf-8"))
    texts = [a.get("translatedText") for a in found["answers"]]
    same = sum(t == d for t, d in zip(texts, found["direct"], strict=True))
    write_record(
        "serve",
        "libretranslate",
        title="LibreTranslate serving our exported .argosmodel, offline",
        command=f"python -m bench.serve.libretranslate --checkpoint {args.checkpoint} --lines {args.lines}",
        host=host_line(),
        setup=(
            "libretranslate 1.9.6 (argos-translate-lt 1.12.1) in its own venv, --load-only en,de "
            "--disable-files-translation, in a network namespace with loopback only (unshare -rn); "
            f"{len(texts)} lines of {args.src} through POST /translate, one per request"
        ),
        rows=[
            {
                "lines": len(texts),
                "errors": sum(t is None for t in texts),
                "equal_to_argos_with_lt_formatting": same,
                "downloads": sum(line.startswith("Downloading") for line in found["model_lines"]),
                "start_seconds": found["start_seconds"],
            }
        ],
        languages=found["languages"],
        printed_about_models=found["model_lines"],
        page=f"{args.screenshot}: {EXAMPLE!r} -> {found['page_shows']!r}",
    )


if __name__ == "__main__":
    main()
