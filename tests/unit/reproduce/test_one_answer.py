"""One answer for one row: every curve table of the committed cpu run prints the numbers of the table its notebook
wrote (``artifacts/cpu/tables/<name>.csv``), pooled and labelled the same way, wherever it appears: the stored
notebook's output and the docs page's table."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from conftest import REPO
from papa.paper.tables import TASK_NAMES, format_cell

TABLES = REPO / "artifacts" / "cpu" / "tables"
NOTEBOOKS = REPO / "notebooks"
RESULTS = REPO / "docs" / "results.md"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FRACTIONS = ("1", "1/2", "1/8", "1/16", "0")
# The docs' curve tables: (block, the notebook's table, the (task, selection) rows it prints).
PAGE_TABLES = [
    ("fig2-table", "fig2_main_results", [(t, "lambda") for t in ("cola", "sst2", "ner", "pos", "mrpc")]),
    ("fig5-table", "fig5_head_selection", [("sst2", s) for s in ("lambda", "lambda@full", "first_to_last",
                                                                 "last_to_first", "random", "reversed_lambda",
                                                                 "reversed_lambda@full")]),
    ("fig6-table", "fig6_mlm", [("mlm", "lambda"), ("sst2", "lambda")]),
]


def _curves(name: str) -> pd.DataFrame:
    table = pd.read_csv(TABLES / f"{name}.csv", index_col=0, dtype={"fraction_label": str})
    return table[table.model == MODEL]


def expected_cells(curves: pd.DataFrame, task: str, selection: str) -> list[str]:
    """The row (task, selection) of a committed curve table as every page prints it: fractions 1 and 0 from the
    shared rows, each cell `format_cell` of its mean, interval and the draws it pools."""
    rows = curves[(curves.task == task) & (curves.selection == selection)]
    out = []
    for f in FRACTIONS:
        at = rows[rows.fraction_label == f]
        if at.empty:
            continue
        row = at.iloc[0]
        ci = row.ci95 if pd.notna(row.ci95) and row.ci95 != 0 else float("nan")
        out.append(format_cell(row["mean"], ci, orders=row.get("orders", 1)))
    return out


def page_rows(block: str, text: str | None = None) -> dict[str, list[str]]:
    """The rows of a page's generated table: label -> its cells."""
    text = RESULTS.read_text(encoding="utf-8") if text is None else text
    body = text.split(f"<!-- {block}: begin -->", 1)[1].split(f"<!-- {block}: end -->", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] and not set(cells[1]) <= {"-"}:
            rows[cells[0]] = cells[1:]
    return rows


def mismatches(block: str, name: str, wanted, text: str | None = None) -> list[str]:
    """Each (task, selection) whose cells on the page differ from the committed table's."""
    curves, rows = _curves(name), page_rows(block, text)
    out = []
    for task, selection in wanted:
        cells = expected_cells(curves, task, selection)
        if not cells:
            continue
        found = [label for label, printed in rows.items()
                 if label.startswith(TASK_NAMES[task] + " ") and printed == cells]
        if not found:
            out.append(f"{block}: {task}/{selection}: the table says {cells}")
    return out


@pytest.mark.parametrize("block, name, wanted", PAGE_TABLES, ids=[b for b, _, _ in PAGE_TABLES])
def test_the_pages_curve_tables_print_the_notebooks_tables(block, name, wanted):
    assert mismatches(block, name, wanted) == []


def test_a_page_that_pools_other_draws_than_its_notebook_is_caught():
    """The page's Fig. 2 table once pooled λ at 1/8 over four rankings (notebook 06's draws) where notebook 02's
    table holds one: 0.781 ± 0.009 (4 orders) against 0.783 ± 0.005. Reintroduced, the comparison fails."""
    text = RESULTS.read_text(encoding="utf-8")
    row = next(label for label in page_rows("fig2-table") if label.startswith("SST-2 "))
    good = page_rows("fig2-table")[row]
    bad = [*good[:2], "0.781 ± 0.009 (4 orders)", *good[3:]]
    changed = text.replace(f"| {row} | " + " | ".join(good) + " |", f"| {row} | " + " | ".join(bad) + " |")
    assert changed != text
    assert mismatches("fig2-table", "fig2_main_results", [("sst2", "lambda")], changed) == [
        f"fig2-table: sst2/lambda: the table says {good}"]


def _saved_tables(notebook: str) -> list[tuple[str, str]]:
    """(table name, the text of the cell's outputs) of every cell of a stored notebook that saves a curve table and
    shows it."""
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    found = []
    for cell in nb["cells"]:
        source = "".join(cell.get("source", ""))
        for name in re.findall(r"save_table\(curves, settings.folder, \"(\w+)\"\)", source):
            shown = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))
            found.append((name, shown))
    return found


@pytest.mark.parametrize("notebook", ["02_main_results", "06_head_selection", "07_mlm_electra"])
def test_the_stored_notebooks_show_the_tables_they_wrote(notebook):
    """Every cell of the notebook's curve tables, as the committed CSV gives it, is in the stored output of the cell
    that wrote it (pooled and labelled the same way: "(k orders)" where a point pools k draws)."""
    saved = _saved_tables(notebook)
    assert saved, f"{notebook} saves no curve table"
    for name, shown in saved:
        curves = _curves(name)
        missing = [(t, s, c) for t, s in sorted(set(zip(curves.task, curves.selection)))
                   for c in expected_cells(curves, t, s) if c not in shown]
        assert missing == [], f"{notebook}'s {name} table shows other numbers than its CSV: {missing[:5]}"
