"""The vocabulary is the one owner of papa's closed sets of names: the CLI's choices come from it and no other module
(nor a notebook's code) spells one of its tuples out again."""
from __future__ import annotations

import argparse
import ast

import nbformat
import pytest

from conftest import REPO
from papa import cli
from papa.core import vocabulary

VOCABULARY = {name: value for name, value in vars(vocabulary).items()
              if name.isupper() and isinstance(value, tuple)}
# Tuples of one name cannot be told from an ordinary literal; every other tuple must appear only in the vocabulary.
CHECKED = {name: value for name, value in VOCABULARY.items() if len(value) > 1}
# Literals that hold the same names for another reason: the paper's Table 1 columns, in the order of its numbers.
NOT_COPIES = {("papa/paper/paper_numbers.py", ("cola", "mrpc", "sst2", "mnli", "ner", "pos"))}


def _choices(parser: argparse.ArgumentParser, where: str = "papa"):
    """(where, option, choices) of every option with choices, through every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _choices(sub, f"{where} {name}")
        elif action.choices is not None:
            yield where, action.option_strings or [action.dest], action.choices


def _string_literals(source: str):
    """(line, values) of every tuple, list or set display of two or more string constants in `source`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, tuple(e.value for e in node.elts)


def _redeclared(values: tuple[str, ...]) -> list[str]:
    # Equal as sets: a reordered copy is a copy too.
    return [name for name, owned in CHECKED.items() if set(values) == set(owned)]


def test_every_cli_choice_list_is_a_vocabulary_tuple():
    found = list(_choices(cli.build_parser()))
    assert {tuple(option) for _, option, _ in found} >= {("--rounding",), ("--layout",), ("--split",),
                                                         ("--notebooks",), ("--submitit",), ("action",)}
    for where, option, choices in found:
        # The very object, not an equal copy: the CLI cannot drift from the library.
        assert any(choices is owned for owned in VOCABULARY.values()), f"{where} {option}: choices {choices}"


def test_shared_options_are_declared_once():
    """The options several subcommands share come from one declaration (same help, same default everywhere)."""
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for option, commands in {"--data-dir": ("extract", "rank", "probe", "reproduce", "jobs"),
                             "--device": ("extract", "rank", "probe", "reproduce", "jobs"),
                             "--quiet": ("extract", "rank", "probe", "reproduce", "jobs"),
                             "--profile": ("rank", "probe", "reproduce", "jobs"),
                             "--force": ("rank", "probe", "reproduce"),
                             "--workers": ("reproduce", "jobs")}.items():
        declared = {(a.help, a.default) for c in commands for a in subs[c]._actions if option in a.option_strings}
        assert len(declared) == 1, f"{option} is declared differently in {commands}: {declared}"


def test_no_module_redeclares_a_vocabulary_tuple():
    copies = []
    for path in sorted((REPO / "papa").rglob("*.py")):
        if path.name == "vocabulary.py" and path.parent.name == "core":
            continue
        for line, values in _string_literals(path.read_text(encoding="utf-8")):
            if (path.relative_to(REPO).as_posix(), values) in NOT_COPIES:
                continue
            copies += [f"{path.relative_to(REPO)}:{line} repeats {name}" for name in _redeclared(values)]
    assert copies == []


def test_no_notebook_code_redeclares_a_vocabulary_tuple():
    """Notebooks import the names too; only their parameters cells hold literals (papermill overrides them)."""
    copies = []
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
                continue
            for line, values in _string_literals(cell.source):
                copies += [f"{path.name}: {values} repeats {name}" for name in _redeclared(values)]
    assert copies == []


def test_vocabulary_imports_nothing():
    """Importable by the CLI at no cost: no torch, no papa module, nothing."""
    tree = ast.parse((REPO / "papa" / "core" / "vocabulary.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in imports)


def test_owners_agree_with_the_vocabulary():
    from papa.method.controller import KEEP, MIX, MODE_NAMES, REPLACE
    from papa.runs.profiles import PROFILES, Profile
    from papa.tasks.registry import task_names

    assert tuple(MODE_NAMES) == vocabulary.HEAD_MODES and (KEEP, REPLACE, MIX) == (0, 1, 2)
    assert set(vocabulary.PROFILE_NAMES) <= set(PROFILES)
    assert set(vocabulary.PAPER_TASKS) < set(task_names())
    assert Profile("p", *[None] * 6).fractions == vocabulary.PAPER_FRACTIONS


@pytest.mark.parametrize("values", [("zeros", "toeplitz", "identity"), ["keep", "replace", "mix"]])
def test_the_scan_finds_copies(values):
    """The scan itself: a reordered tuple or a list of the same names counts as a copy."""
    assert _redeclared(next(_string_literals(repr(values)))[1])
