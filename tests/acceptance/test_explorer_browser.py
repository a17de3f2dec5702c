"""The widgets explorer in a real browser: Voilà serves it on localhost, headless Chromium uses the widgets.

Needs Debian's ``chromium`` (README prerequisites; `.ci/run` installs it). Without it the test is skipped with a
message saying so. The test starts and stops its own Voilà server; Playwright drives the system Chromium (started
from its executable, so no browser is downloaded).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from conftest import free_port, local_server

pytestmark = [pytest.mark.integration, pytest.mark.acceptance]

REPO = Path(__file__).resolve().parents[2]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
HEAD_VIEW = "img.widget-image"


@pytest.fixture(scope="module")
def explorer_notebook(tmp_path_factory, minilm):
    """A copy of notebooks/explorer.ipynb whose artifacts folder holds MiniLM constants from a few sentences and a
    λ ranking for MiniLM (made once for the module's tests)."""
    tmp_path = tmp_path_factory.mktemp("explorer")
    from papa.method.architectures import model_signature
    from papa.method.extract import extract_constants
    from papa.method.rankings import HeadRanking
    from papa.tasks.corpus import Corpus

    model, tok = minilm
    sentences = ["a gripping , funny film .", "the plot is thin .", "it rains in paris .", "what a mess ."]
    constants = extract_constants(model, tok, Corpus("toy", sentences * 4), max_length=32, model_name=MINILM,
                                  progress=False)
    constants.save(tmp_path / "artifacts" / "constants" / "toy.safetensors")
    lambdas = torch.linspace(0.05, 0.95, 72).reshape(6, 12)
    HeadRanking.from_lambdas(lambdas, signature=model_signature(model, MINILM), task="toy", max_length=32,
                             layout=constants.metadata.layout).save(tmp_path / "artifacts" / "rankings" / "r.safetensors")
    nb = nbformat.read(REPO / "notebooks" / "explorer.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "explorer.ipynb needs exactly one cell tagged 'parameters'"
    params[0].source += f"\nartifacts_dir = {str(tmp_path / 'artifacts')!r}"
    path = tmp_path / "explorer.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def voila(explorer_notebook):
    """One Voilà server for the module's tests: each page it serves runs the explorer in a kernel of its own."""
    pytest.importorskip("voila", reason="voila is not installed (it is a test dependency: pip install -e '.[test]')")
    tmp_path = explorer_notebook.parent
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "voila", str(explorer_notebook), "--no-browser", f"--port={port}",
               "--Voila.ip=127.0.0.1", "--Voila.tornado_settings={'xsrf_cookies': False}"]
    with local_server(command, f"http://127.0.0.1:{port}/", name="Voilà", log=tmp_path / "voila.log", timeout=90,
                      cwd=tmp_path, env=env) as url:
        yield url


def test_browser_picks_heads_from_the_menus_and_the_grid(chromium, voila, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.set_default_timeout(240_000)
            page.goto(voila)
            image = page.locator(HEAD_VIEW)

            def shown() -> str:
                """The head view's image once it has loaded (src and a real width), as a data URL."""
                page.wait_for_function(
                    "sel => { const i = document.querySelector(sel); return i && i.complete && i.naturalWidth > 0; }",
                    arg=HEAD_VIEW)
                return image.get_attribute("src")

            def changed_from(before: str) -> str:
                page.wait_for_function("([sel, before]) => { const i = document.querySelector(sel); "
                                       "return i && i.src !== before && i.complete && i.naturalWidth > 0; }",
                                       arg=[HEAD_VIEW, before], timeout=120_000)
                return image.get_attribute("src")

            first = shown()
            selects = page.locator(".widget-dropdown select")
            labels = page.locator(".widget-dropdown label").all_inner_texts()
            assert labels == ["model", "constants", "λ ranking", "layer", "head"], labels
            head_menu = selects.nth(4)
            # The grid: one thumbnail per layer x head of MiniLM, each drawn, with its λ rank and λ under it.
            cells = page.locator(".papa-head")
            cells.nth(71).wait_for()
            assert cells.count() == 6 * 12
            assert page.locator(".papa-head canvas").first.evaluate("c => c.width") > 0
            assert re.fullmatch(r"#\d+ λ \d\.\d{3}", page.locator(".papa-caption").first.inner_text())
            # each caption shown whole in its cell, none cut (such as "#44 λ …")
            assert page.locator(".papa-caption").evaluate_all(
                "cs => cs.filter(c => c.scrollWidth > c.clientWidth || c.scrollHeight > c.clientHeight)"
                ".map(c => c.textContent)") == []

            # A menu, as before: head 5 of layer 0.
            head_menu.select_option("5")
            second = changed_from(first)
            assert page.locator('.papa-head[data-layer="0"][data-head="5"]').get_attribute("aria-pressed") == "true"

            # A click on a thumbnail picks its head: the menus follow, and so does the head view.
            page.locator('.papa-head[data-layer="3"][data-head="7"]').click()
            third = changed_from(second)
            page.wait_for_function("() => { const s = document.querySelectorAll('.widget-dropdown select'); "
                                   "return s[3].value !== '' && s[3].selectedIndex === 3 && s[4].selectedIndex === 7; }")
            assert third not in (first, second)
            assert page.locator('.papa-head[data-layer="3"][data-head="7"]').get_attribute("aria-pressed") == "true"
            text = page.locator("body").inner_text()
            assert "diagonal share" in text and "special mass" in text
            lam = float(torch.linspace(0.05, 0.95, 72)[3 * 12 + 7])
            assert f"λ {lam:.3f}" in text
            page.screenshot(path=tmp_path / "explorer.png", full_page=True)
        finally:
            browser.close()


@pytest.mark.parametrize("width,height", [(1280, 800), (1400, 900), (1920, 1080)])
def test_a_clicked_head_is_in_sight_on_a_laptop_window(chromium, voila, width, height):
    """Below the grid, at 1400 x 900, the head view sits at y 1088-1347 px after a click, below the window. Beside the
    grid, or scrolled into sight: after a click its image is in the window."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(240_000)
            page.goto(voila)
            page.wait_for_function(
                "sel => { const i = document.querySelector(sel); return i && i.complete && i.naturalWidth > 0; }",
                arg=HEAD_VIEW)
            before = page.locator(HEAD_VIEW).get_attribute("src")
            page.locator('.papa-head[data-layer="5"][data-head="11"]').click()
            page.wait_for_function("([sel, before]) => { const i = document.querySelector(sel); "
                                   "return i && i.src !== before && i.complete && i.naturalWidth > 0; }",
                                   arg=[HEAD_VIEW, before], timeout=120_000)
            box = page.locator(HEAD_VIEW).bounding_box()
            # the whole head view in the window, not a sliver of it
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, (width, height, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, height, box)
            # every caption on one line: the rows of the grid are of one height
            heights = page.locator(".papa-head").evaluate_all("cells => cells.map(c => c.offsetHeight)")
            assert len(set(heights)) == 1, sorted(set(heights))
            assert page.locator(".papa-caption").evaluate_all(
                "cs => cs.filter(c => c.scrollWidth > c.clientWidth || c.scrollHeight > c.clientHeight)"
                ".map(c => c.textContent)") == [], (width, height)
        finally:
            browser.close()
