"""A notebook's kernel and the CLI pay for the imports they use, when they use them: importing the section modules (the
import lines of every stored notebook's code cells) and ``papa.cli`` loads none of the packages that take seconds to
import and that only some calls need (scikit-learn for three metrics, scipy.stats for the intervals, transformers'
model-loading modules for attaching, torch's compiler). Which modules load is checked, not seconds:
``python artifacts/timings/import_time.py`` prints the times beside ``import torch, transformers``."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO
from papa.core.vocabulary import NOTEBOOKS

#: Imported where used, never by importing a section module or the CLI: the module, and what needs it.
HEAVY = {
    "sklearn": "scikit-learn: CoLA's, SST-2's and MRPC's metrics (papa.tasks.metrics)",
    "scipy.stats": "scipy.stats: intervals and tests (papa.runs.statistics, results, stability)",
    "transformers.modeling_utils": "transformers' model loading: attaching (papa.method.adapters.interface)",
    "transformers.masking_utils": "transformers' masks: attaching (papa.method.adapters.interface)",
    "torch._dynamo": "torch's compiler: compiled steps",
    "seqeval": "seqeval: NER's and POS's metric",
    "datasets": "datasets: reading a task from the hub",
}


def notebook_imports() -> list[str]:
    """Every import line of the stored notebooks' code cells (the section notebooks and the explorer)."""
    lines = []
    for name in (*NOTEBOOKS, "explorer"):
        nb = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
        for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
            lines += [line for line in "".join(cell["source"]).splitlines() if line.startswith(("import ", "from "))]
    return sorted(set(lines))


def _loaded_after(code: str) -> list[str]:
    """The modules of `HEAVY` loaded in a fresh interpreter after running `code`."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {sorted(HEAVY)!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_notebooks_and_the_cli_import_no_heavy_package_they_do_not_use():
    imports = notebook_imports()
    assert any("papa.sections" in line for line in imports)  # the notebooks' imports were found
    loaded = _loaded_after("\n".join([*imports, "import papa.cli"]))
    assert loaded == [], "imported at import time: " + "; ".join(HEAVY[m] for m in loaded)


def test_a_heavy_package_is_seen_once_a_call_needs_it():
    """The check sees what a call imports: computing a metric, an interval and attaching load their packages."""
    loaded = _loaded_after("from papa.tasks.metrics import accuracy\naccuracy([1, 0], [1, 1])\n"
                           "from papa.runs.statistics import Estimate\n"
                           "Estimate(0.1, 0.01, 0.0, seeds=3, examples=False).interval()\n"
                           "from papa.method.adapters.interface import register_papa_implementation\n"
                           "register_papa_implementation('sdpa')")
    assert {"sklearn", "scipy.stats", "transformers.modeling_utils", "transformers.masking_utils"} <= set(loaded)
