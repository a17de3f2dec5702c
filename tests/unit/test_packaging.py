"""The environment is pinned once: pyproject.toml, environment.yml and constraints.txt agree."""
from __future__ import annotations

import re

import pytest
import tomllib
import yaml

from conftest import REPO


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+)\s*", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def _declared(project: dict) -> list[str]:
    """The direct dependencies and those of every extra (test, docs)."""
    return [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]


def test_environment_yml_has_the_pyproject_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = _declared(project)
    assert all("==" in d for d in declared), "every direct dependency is pinned exactly"
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _pins(pip) == _pins(declared)


def test_constraints_agree_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = _pins(_declared(project))
    locked = _pins((REPO / "constraints.txt").read_text().splitlines())
    assert {k: locked.get(k) for k in declared} == declared
    assert declared["torch"] == "2.13.0" and declared["transformers"].startswith("5.23.")
    assert declared["datasets"].startswith("5.2.")


def test_one_version_and_the_citation_carries_it():
    import papa

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # papa.__version__ owns it
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert str(citation["version"]) == papa.__version__
    assert citation["license"] == project["license"]["text"] and (REPO / "LICENSE").read_text().startswith(
        f"{citation['license']} License")
    assert citation["preferred-citation"]["year"] == 2022


def test_papa_version(capsys):
    import papa
    from papa import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"papa {papa.__version__}"


#: Import names whose distribution is named otherwise.
_DISTRIBUTIONS = {"sklearn": "scikit-learn", "yaml": "pyyaml"}


def test_every_third_party_import_of_papa_is_declared():
    """papa imports nothing it does not declare (a package that only arrives through another's dependencies can
    go with that package's next release)."""
    import ast
    import sys

    imported = set()
    for path in (REPO / "papa").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "papa"}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = set(_pins(project["dependencies"]))
    missing = {n for n in third_party if _DISTRIBUTIONS.get(n, n).lower().replace("_", "-") not in declared}
    assert not missing, f"papa imports {sorted(missing)} without declaring them in pyproject's dependencies"
