"""The notebooks in ``notebooks/``: the cpu run's executed copies.

Each is stored with its parameters cell saying what ran, no progress bar and metadata as JupyterLab writes it.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from papa.core.artifacts import atomic_path
from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NOTEBOOKS
from papa.reproduce.batch import NOTEBOOK_DIR
from papa.reproduce.notebooks import WIDGET_VIEW, as_lab_writes

#: The profile whose executed notebooks ``notebooks/`` stores.
STORED_PROFILE = "cpu"

#: The tag of a cell whose output nbval compares (it runs with ``--nbval-lax``: no other output is compared).
COMPARED = "nbval-check-output"

#: Parameters the stored cell keeps as written: where the data is is the reader's machine's, not the run's.
_KEPT = ("data_dir",)

#: A progress bar as tqdm writes it to a stream ("12%|█▏  | 3/25 [00:01<00:09, ...]").
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+ \[")


def store_run_notebooks(run_dir: str | Path, notebook_dir: str | Path = NOTEBOOK_DIR) -> list[Path]:
    """Write each executed section notebook of the run in `run_dir` into `notebook_dir` as `stored_notebook` makes
    it; returns the paths written. Every section must have been executed first."""
    run_dir, notebook_dir = Path(run_dir), Path(notebook_dir)
    executed = {name: RunFolder(run_dir).notebook(name) for name in NOTEBOOKS}
    missing = [n for n, p in executed.items() if not p.is_file()]
    if missing:
        raise InputError(f"{run_dir} holds no executed notebook for {', '.join(missing)}: run "
                         f"`papa reproduce --profile {STORED_PROFILE} --out {run_dir}` first")
    stored = {name: stored_notebook(path) for name, path in executed.items()}
    written = []
    for name, nb in stored.items():
        target = notebook_dir / f"{name}.ipynb"
        with atomic_path(target) as tmp:
            Path(tmp).write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
        written.append(target)
    return written


def stored_notebook(executed: str | Path) -> dict:
    """The executed notebook at `executed` as ``notebooks/`` stores it: injected values written into the parameters
    cell, progress bars, cleared outputs and papermill's metadata dropped. Refused unless it ran at `STORED_PROFILE`."""
    nb = json.loads(Path(executed).read_text(encoding="utf-8"))
    cells = nb["cells"]
    injected = [c for c in cells if "injected-parameters" in c["metadata"].get("tags", [])]
    params = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    if len(params) != 1 or len(injected) > 1:
        raise InputError(f"{executed} has {len(params)} parameters cells and {len(injected)} injected ones: "
                         "not a notebook papa reproduce executed")
    values = _assigned("".join(injected[0]["source"])) if injected else {}
    values = {k: v for k, v in values.items() if k not in _KEPT}
    source = with_values("".join(params[0]["source"]), values)
    profile = _assigned(source).get("profile")
    if profile != STORED_PROFILE:
        raise InputError(f"{executed} ran at profile {profile!r}; notebooks/ stores the {STORED_PROFILE} run's")
    params[0]["source"] = source.splitlines(keepends=True)
    nb["cells"] = [c for c in cells if c not in injected]
    for cell in nb["cells"]:
        cell["metadata"].pop("papermill", None)
        cell["metadata"].pop("execution", None)
        if cell["cell_type"] == "code":
            cell["outputs"] = [o for o in cell["outputs"] if not (is_progress_bar(o) or is_cleared(o))]
    nb["metadata"].pop("papermill", None)
    return nb


def store_picture_of_widgets(notebook: str | Path) -> bool:
    """Keep, of each output that shows widgets beside a picture of them, the picture alone (a stored widget view
    shows nothing without its kernel), and the metadata as JupyterLab writes it; returns whether the file changed."""
    notebook = Path(notebook)
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    pictured = [out for cell in nb.get("cells", []) for out in cell.get("outputs", [])
                if WIDGET_VIEW in out.get("data", {}) and "image/png" in out["data"]]
    for out in pictured:
        del out["data"][WIDGET_VIEW]
    if pictured:
        with atomic_path(notebook) as tmp:
            Path(tmp).write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
    return as_lab_writes(notebook) or bool(pictured)


def is_progress_bar(output: dict) -> bool:
    """Whether a cell output is a progress bar: a tqdm line on a stream, or a widget bar."""
    if output.get("output_type") == "stream":
        return bool(_BAR.search("".join(output.get("text", ""))))
    view = output.get("data", {}).get(WIDGET_VIEW)
    text = "".join(output.get("data", {}).get("text/plain", ""))
    return view is not None and ("HBox" in text or _BAR.search(text) is not None)


def is_cleared(output: dict) -> bool:
    """Whether a cell output is an empty display (what a finished progress bar leaves)."""
    return output.get("output_type") in ("display_data", "update_display_data") and not output.get("data")


def with_values(source: str, values: dict) -> str:
    """A parameters cell's `source` with each name in `values` assigned that literal instead (its comment kept);
    names the cell does not assign are refused."""
    lines = source.splitlines()
    spans = {s.targets[0].id: s for s in ast.parse(source).body if isinstance(s, ast.Assign)}
    unknown = sorted(set(values) - set(spans))
    if unknown:
        raise InputError(f"the parameters cell assigns no {', '.join(unknown)}")
    for name, statement in sorted(spans.items(), key=lambda kv: -kv[1].lineno):  # bottom up: line numbers hold
        if name not in values or values[name] == ast.literal_eval(statement.value):
            continue
        last = lines[statement.end_lineno - 1]
        comment = last[statement.end_col_offset:].strip()
        code = f"{name} = {literal(values[name])}"
        if comment:  # at the column it was at, or two spaces after a longer value
            at = len(last) - len(last[statement.end_col_offset:].lstrip())
            code = (code.ljust(at) if len(code) < at else code + "  ") + comment
        lines[statement.lineno - 1:statement.end_lineno] = [code]
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def literal(value: object) -> str:
    """`value` (a str, number, bool, None or a list of them) as the notebooks write a parameter: strings in double
    quotes."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return repr(value)


def _assigned(source: str) -> dict:
    return {s.targets[0].id: ast.literal_eval(s.value) for s in ast.parse(source).body
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)}
