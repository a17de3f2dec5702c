"""A reader reruns a section notebook in JupyterLab and saves it: the clone is as it was (every table the notebook
writes again has the same bytes), and the saved notebook holds no progress bar and shows each check folded.

Needs Debian's ``chromium`` (README prerequisites; `.ci/run` installs it) and the data directory; skipped, saying
so, without them. The rerun happens in a git worktree of HEAD in a temporary folder (the clone itself is not
touched); notebook 05 reruns from the committed cpu run (every probe run cached).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, free_port, local_server
from papa.reproduce.stored import is_progress_bar

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

NOTEBOOK = "notebooks/05_data_dependence.ipynb"


@pytest.fixture()
def clone(tmp_path):
    tree = tmp_path / "clone"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=REPO, check=True,
                   capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)


def test_a_rerun_in_lab_leaves_the_clone_clean_and_the_notebook_tidy(chromium, data_dir, clone):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PAPA_PROGRESS", "TQDM_DISABLE")}  # bars on, as a reader's
    env.update(HF_HUB_OFFLINE="1", PAPA_DATA_DIR=str(data_dir), JUPYTER_CONFIG_DIR=str(clone.parent / "config"),
               PYTHONPATH=str(clone))  # the kernel imports the clone's papa
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
               "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={clone}",
               f"--LabApp.workspaces_dir={clone.parent / 'workspaces'}",
               f"--LabApp.user_settings_dir={clone.parent / 'settings'}", "--LabApp.expose_app_in_browser=True"]
    with local_server(command, f"http://127.0.0.1:{port}/lab", name="JupyterLab", log=clone.parent / "lab.log",
                      timeout=120, cwd=clone, env=env), playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(120_000)
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?reset")
            page.locator(".jp-Notebook").first.wait_for()
            # Lab's own commands (Run > Run All Cells, File > Save), through the app it exposes: a menu click can land
            # before the kernel is connected and run nothing
            page.wait_for_function("() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel")
            page.evaluate("""async () => {
                const app = window.jupyterapp, panel = app.shell.currentWidget;
                await panel.sessionContext.ready;
                await app.commands.execute('notebook:run-all-cells');
            }""")
            page.wait_for_function("() => ![...document.querySelectorAll('.jp-InputPrompt')]"
                                   ".some(e => e.textContent.includes('[*]'))", timeout=300_000)
            page.screenshot(path=clone.parent / "rerun.png")  # kept in the temporary folder, for a failure
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            tab = page.locator(".lm-TabBar-tab.jp-mod-current")
            page.wait_for_function("t => !t.classList.contains('jp-mod-dirty')", arg=tab.element_handle())
        finally:
            browser.close()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, check=True, capture_output=True,
                            text=True).stdout.splitlines()
    assert [line for line in status if not line.endswith(NOTEBOOK)] == [], "the rerun changed the clone"
    assert [line for line in status if line.endswith(NOTEBOOK)], "Lab saved no rerun of the notebook"
    nb = json.loads((clone / NOTEBOOK).read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "not every cell ran"
    assert not [o for c in code for o in c["outputs"] if is_progress_bar(o)], "a progress bar is saved"
    assert not [o for c in code for o in c["outputs"] if o.get("output_type") == "error"]
    checks = [o for c in code if "check" in c["metadata"].get("tags", []) for o in c["outputs"]]
    assert checks and all("<details><summary>check: " in "".join(o.get("data", {}).get("text/html", ""))
                          for o in checks), "a check's output is not folded"
