"""The documentation site: `make docs`'s strict build, what it generates from the code, and one page in a browser.

The build runs once per session (about 20 s); the browser check needs Debian's ``chromium`` (skipped without it,
saying so) and drives it with Playwright, which starts that executable: no browser is downloaded.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from papa.cli import build_parser

pytestmark = [pytest.mark.integration, pytest.mark.acceptance]

REPO = Path(__file__).resolve().parents[2]
# Material for MkDocs and mkdocs-gen-files print a banner about MkDocs 2.0 at every build; it says nothing here.
QUIET = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `site`, as `make docs` runs it."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=REPO, env={**os.environ, **QUIET}, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    result = mkdocs_build(REPO / "mkdocs.yml", out)
    assert result.returncode == 0, f"the strict docs build failed:\n{result.stderr[-4000:]}"
    return out


def _image_outputs(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum("image/png" in out.get("data", {}) for cell in cells for out in cell.get("outputs", []))


def test_every_notebook_is_rendered_with_its_stored_outputs(site):
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        page = site / "notebooks" / notebook.stem / "index.html"
        assert page.is_file(), f"{notebook.name} has no page (is it in mkdocs.yml's nav?)"
        html = page.read_text()
        cells = json.loads(notebook.read_text())["cells"]
        # The stored text outputs appear verbatim (escaped): the page shows what git holds, not a new run.
        shown = [c for c in cells if "check" not in c.get("metadata", {}).get("tags", [])]  # checks: left out
        assert "check_table" not in html  # the nbval checks are not part of the page
        stored = [t for c in shown for o in c.get("outputs", []) if o.get("output_type") == "stream"
                  for t in "".join(o["text"]).strip().splitlines()[:1] if t.isalnum()]  # a blank stream has none
        for line in stored[:3]:
            assert line in html, f"{notebook.name}: stored output {line!r} missing from its page"
        assert html.count('src="data:image/png;base64,') >= _image_outputs(notebook)


def test_cli_reference_lists_every_command_and_option(site):
    html = (site / "reference" / "cli" / "index.html").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices, "the parser has no subcommands"
    for name, command in sub.choices.items():
        assert f"papa {name}" in html
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}</code>" in html, f"papa {name} {option} is not in the CLI reference"


def test_api_reference_is_generated_from_the_docstrings(site):
    html = (site / "reference" / "method" / "index.html").read_text()
    from papa.method.extract import extract_constants

    assert 'id="papa.method.extract.extract_constants"' in html
    assert extract_constants.__doc__.startswith("Average every head")
    assert "Average every head" in html  # its docstring, rendered
    for layer in ("core", "method", "tasks", "probing", "runs", "paper", "reproduce"):
        assert (site / "reference" / layer / "index.html").is_file()


@pytest.mark.parametrize("page, builds", [
    ("a link to [the home page](index.md#broken) and an API entry\n\n::: papa.core.errors", True),
    ("a link to [a missing page](missing.md)", False),
    ("a link to [a missing anchor](index.md#missing-anchor)", False),
    ("::: papa.no_such_module", False),
])
def test_strict_build_fails_on_a_broken_link_or_reference(tmp_path, page, builds):
    """The project's settings (strict, link and anchor validation) turn a broken link or an API entry that names
    nothing into a failed build, while the same tiny site without them builds: it inherits mkdocs.yml."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# broken\n\n{page}\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {REPO / 'mkdocs.yml'}\ndocs_dir: {docs}\nnav: [index.md]\nexclude_docs: ''\n"
                      f"plugins: [mkdocstrings]\nhooks: [{REPO / 'docs' / 'hooks.py'}]\n")  # its path is the repo's
    result = mkdocs_build(config, tmp_path / "site")
    assert (result.returncode == 0) == builds, result.stderr[-2000:]
    if not builds:
        assert "WARNING" in result.stderr or "ERROR" in result.stderr  # says why, in MkDocs' log


@pytest.fixture
def served(site) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the test's output is about the page, not each request
        pass


def test_notebook_page_shows_its_figures_in_a_browser(served, chromium, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    expected = _image_outputs(REPO / "notebooks" / "02_main_results.ipynb")
    assert expected >= 1
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.goto(served + "notebooks/02_main_results/")
            # Every figure of the notebook's stored outputs decoded to a real image.
            loaded = page.wait_for_function(
                """n => { const imgs = [...document.querySelectorAll('article img[src^="data:image/png"]')];
                          return imgs.length >= n && imgs.every(i => i.complete && i.naturalWidth > 0)
                                 && imgs.map(i => i.naturalWidth); }""", arg=expected, timeout=60_000).json_value()
            assert len(loaded) >= expected and min(loaded) > 100
            assert "02_main_results" in page.title() or "main" in page.title().lower()
            page.screenshot(path=tmp_path / "02_main_results.png", full_page=False)
        finally:
            browser.close()
