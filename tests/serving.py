"""A real uvicorn server on a free loopback port, and a headless browser, for the serving tests."""

import contextlib
import shutil
import threading
import time

import pytest
import uvicorn
from ports import free_port

from transduce.serve import Listen
from transduce.serve.listen import uvicorn_settings


class Server:
    """uvicorn in a thread on a free loopback port, set up as `transduce serve` sets it up
    (`options`: more of `Listen`'s settings)."""

    def __init__(self, app, **options):
        self.port = free_port()
        listen = Listen(port=self.port, **options)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **uvicorn_settings(listen)))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def browser_page():
    """A page of Debian's chromium, headless, through playwright; the test is skipped, saying
    why, when either is missing."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make test installs it with apt when it can)")
    playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()
