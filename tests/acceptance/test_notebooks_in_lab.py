"""The section notebooks as a reader first sees them: JupyterLab in headless Chromium opens each stored notebook and
shows the cpu run's outputs (its first line, its figures), and opening it does not mark it modified.

Needs Debian's ``chromium`` (README prerequisites; `.ci/run` installs it); skipped, saying so, without it. The test
serves a copy of notebooks/ (Lab writes nothing into the clone) and keeps a screenshot of each notebook in its
temporary folder.
"""
from __future__ import annotations

import os
import shutil
import sys

import pytest

from conftest import REPO, free_port, local_server
from papa.core.vocabulary import NOTEBOOKS
from papa.reproduce.stored import STORED_PROFILE

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUPYTER_CONFIG_DIR": str(root / "config")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
               "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
               f"--LabApp.workspaces_dir={root / 'workspaces'}", f"--LabApp.user_settings_dir={root / 'settings'}"]
    with local_server(command, f"http://127.0.0.1:{port}/lab", name="JupyterLab", log=root / "lab.log", timeout=120,
                      cwd=root, env=env):
        yield f"http://127.0.0.1:{port}/", root


@pytest.fixture(scope="module")
def lab_page(chromium, lab):
    """One headless Chromium page on the module's JupyterLab."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            yield page
        finally:
            browser.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_lab_shows_the_cpu_runs_outputs_and_leaves_the_notebook_unmodified(lab, lab_page, name):
    url, root = lab
    page = lab_page
    page.goto(f"{url}lab/tree/notebooks/{name}.ipynb?reset")  # only this notebook open
    first = page.locator(".jp-OutputArea-output:visible").filter(has_text="Outputs below: profile").first
    first.wait_for()
    assert first.inner_text().startswith(f"Outputs below: profile {STORED_PROFILE}, "), name
    page.wait_for_timeout(3_000)  # what Lab would rewrite on open marks the tab within this
    tab = page.locator(".lm-TabBar-tab.jp-mod-current")
    assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), f"Lab marks {name} modified"
    stored = (REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8")
    if '"image/png"' in stored:  # Tables 1 and 2 (04, 05) draw none
        page.locator(".jp-RenderedImage img:visible").first.wait_for()  # Lab renders what it stores
    page.screenshot(path=root / f"{name}.png")
