"""A run folder has one owner: `papa.core.run_folder.RunFolder` names every path a run writes, its docstring draws
the layout, and no other module of papa spells a path of that layout."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO
from papa.core import run_folder
from papa.core.run_folder import RunFolder
from papa.core.settings import Resources, RunSettings

LAYOUT_LINE = re.compile(r"^      (\S+?/?)\s{2,}\S", re.M)


def _entries() -> dict[str, Path]:
    folder = RunFolder(Path("run"))
    names = [n for n, v in vars(RunFolder).items() if isinstance(v, property)]
    return {n: getattr(folder, n) for n in names}


def test_the_layout_drawn_is_the_layout_named():
    drawn = LAYOUT_LINE.findall(run_folder.__doc__)
    named = sorted(p.name + ("/" if p.suffix == "" else "") for p in _entries().values())
    assert sorted(drawn) == named
    assert all(p.parent == Path("run") for p in _entries().values())


def test_a_folder_is_made_once_and_compares_by_its_path(tmp_path):
    folder = RunFolder.at(tmp_path)
    assert RunFolder.at(folder) is folder and folder == RunFolder(str(tmp_path))
    assert folder.table("fig2") == tmp_path / "tables" / "fig2.csv"
    assert folder.notebook("02_main_results") == tmp_path / "notebooks" / "02_main_results.ipynb"
    assert Path(folder) == tmp_path and str(folder) == str(tmp_path)
    assert folder.is_empty() and RunFolder(tmp_path / "not yet").is_empty()
    folder.results.write_text("", encoding="utf-8")
    assert not folder.is_empty()
    with pytest.raises(AttributeError):
        folder.root = tmp_path / "other"  # frozen: a run's folder does not move under its readers


def test_settings_travel_together(tmp_path):
    settings = RunSettings("cpu", str(tmp_path), data_dir=tmp_path / "data", device="cuda")
    assert settings.folder == RunFolder(tmp_path)
    assert settings.config_options() == {"profile": "cpu", "folder": RunFolder(tmp_path),
                                         "data_dir": str(tmp_path / "data"), "device": "cuda", "force": False}
    assert settings.resources == Resources(tmp_path / "data", "cuda", True)


def _spelled_paths(path: Path, names: set[str]) -> list[str]:
    """Where `path` joins a name of the layout onto a folder (``x / "tables"``) or spells one after a slash."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
                and str(node.right.value) in names:
            found.append(f"{path.relative_to(REPO)}:{node.lineno} / {node.right.value!r}")
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant) and any(str(part.value).startswith(f"/{n}") for n in names):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} f-string '{part.value}'")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.match(rf"({'|'.join(map(re.escape, names))})/", node.value):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} relative path '{node.value[:40]}'")
    return found


#: Paths that share a name with the layout but are not in a run folder.
NOT_A_RUN = {("papa/reproduce/batch.py", "/ 'notebooks'")}  # the repository's notebooks/, the batch's sources


def test_no_other_module_spells_a_path_of_the_layout():
    names = {p.name for p in _entries().values()}
    found = [hit for path in sorted((REPO / "papa").rglob("*.py")) if path.name != "run_folder.py"
             for hit in _spelled_paths(path, names)
             if not any(hit.startswith(f"{where}:") and hit.endswith(what) for where, what in NOT_A_RUN)]
    assert found == [], "take the path from papa.core.run_folder.RunFolder"


def test_the_guard_sees_a_joined_path_and_a_relative_one(tmp_path, monkeypatch):
    import tests.unit.core.test_run_folder as guard

    monkeypatch.setattr(guard, "REPO", tmp_path)
    module = tmp_path / "m.py"
    module.write_text('out = root / "tables"\nshown = f"figures/{name}.png"\nnamed = "rankings/x.safetensors"\n'
                      'fine = RunFolder.figure_file("x")\n', encoding="utf-8")
    assert sorted(hit.split(" ", 1)[0] for hit in guard._spelled_paths(module, {"tables", "figures", "rankings"})) == [
        "m.py:1", "m.py:2", "m.py:3"]
