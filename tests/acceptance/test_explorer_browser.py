"""The widgets explorer in a real browser: Voilà serves it on localhost, headless Chromium changes a widget.

Needs Debian's ``chromium`` (README prerequisites; `.ci/run` installs it). Without it the test is skipped with a
message saying so. The test starts and stops its own server and browser, and talks to Chromium over the
DevTools protocol (websocket-client), so no browser driver is needed.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.acceptance]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--window-size=1200,1400"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium found (install Debian's `chromium` package): the browser test of the explorer is "
                "skipped; its callbacks are still tested in tests/unit/test_explorer.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class DevTools:
    """The smallest DevTools-protocol client: evaluate JavaScript and take screenshots."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")


@pytest.fixture
def explorer_notebook(tmp_path, minilm):
    """A copy of notebooks/explorer.ipynb whose constants folder holds MiniLM constants from a few sentences."""
    from papa.method.extract import extract_constants

    model, tok = minilm
    sentences = ["a gripping , funny film .", "the plot is thin .", "it rains in paris .", "what a mess ."]
    constants = extract_constants(model, tok, sentences * 4, max_length=32, corpus="toy",
                                  model_name="sentence-transformers/all-MiniLM-L6-v2", progress=False)
    constants.save(tmp_path / "constants" / "toy.safetensors")
    nb = nbformat.read(REPO / "notebooks" / "explorer.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "explorer.ipynb needs exactly one cell tagged 'parameters'"
    params[0].source += f"\nconstants_dir = {str(tmp_path / 'constants')!r}"
    path = tmp_path / "explorer.ipynb"
    nbformat.write(nb, path)
    return path


def test_browser_changes_the_heatmap(explorer_notebook, tmp_path):
    chromium = _chromium()
    pytest.importorskip("voila", reason="voila is not installed (it is a test dependency: pip install -e '.[test]')")
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "voila", str(explorer_notebook), "--no-browser", f"--port={port}",
         "--Voila.ip=127.0.0.1", "--Voila.tornado_settings={'xsrf_cookies': False}"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "voila.log", "wb"))
    browser = None
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait(lambda: _http_ok(url), 90, "Voilà to serve the explorer", server)
        debug_port = _free_port()
        browser = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--remote-debugging-port={debug_port}",
                                    f"--user-data-dir={tmp_path / 'chromium'}", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pages = _wait(lambda: _targets(debug_port), 60, "Chromium's DevTools endpoint", browser)
        tab = DevTools(pages[0]["webSocketDebuggerUrl"])
        image = "(() => { const i = document.querySelector('img.widget-image'); return i && i.complete && " \
                "i.naturalWidth > 0 ? i.src : null; })()"
        first = _wait(lambda: tab.js(image), 240, "the explorer's heatmap to render")
        selects = tab.js("Array.from(document.querySelectorAll('.widget-dropdown select')).length")
        assert selects == 3, f"expected the constants, layer and head dropdowns, found {selects}"
        # Pick head 5 in the third dropdown, as a person would, and let the widget see the change.
        tab.js("(() => { const s = document.querySelectorAll('.widget-dropdown select')[2]; "
               "s.selectedIndex = 5; s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        second = _wait(lambda: (src := tab.js(image)) != first and src, 120, "the heatmap to change")
        assert second != first
        text = tab.js("document.body.innerText")
        assert "diagonal share" in text and "special mass" in text
        shot = tab.call("Page.captureScreenshot", format="png")["data"]
        (tmp_path / "explorer.png").write_bytes(__import__("base64").b64decode(shot))
    finally:
        for proc in (browser, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _targets(port: int):
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5) as response:
            pages = [t for t in json.loads(response.read()) if t.get("type") == "page"]
            return pages or None
    except OSError:
        return None
