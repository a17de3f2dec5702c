"""Checks of a notebook's table whose numbers another CPU may change, said in a line that no CPU or profile changes.

Float rounding differs between CPUs, so such a table is shown in an ``nbval-ignore-output`` cell and checked in the
next one: `check_table` raises on a value out of its range or vocabulary and prints the table's structure and the
rules that held, which nbval compares.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import pandas as pd

Range = tuple[float, float]


#: The columns of an interval, NaN where one seed ran (`check_table`).
INTERVAL_COLUMNS = ("ci95", "low", "high")

#: Index levels that hold a fraction of input-dependent heads: their values are the profile's.
FRACTION_LEVELS = ("fraction", "fraction_label")


class TableCheckError(AssertionError):
    """A notebook table broke a rule its check states (a bug, or a run that went wrong): not a rounding difference."""


def check_table(table: pd.DataFrame | pd.Series, name: str, *, between: Range | Mapping[str, Range] | None = None,
                allowed: Mapping[str, Collection] | None = None, nan_ok: Collection[str] | bool = False,
                labels: bool = True, ordered: Sequence[str] = (), counted: bool = True) -> None:
    """Check `table` and print one line of what held; raise `TableCheckError` where a rule breaks.

    `between`: (low, high) for every numeric value or per column; `allowed`: a column's values; `nan_ok`: columns
    that may hold NaN (True: any; an interval may where ``n`` < 2); `ordered`: columns non-decreasing within a row;
    `labels` / `counted` False leave the row labels / the rows out of the line."""
    frame = table.to_frame() if isinstance(table, pd.Series) else table
    if frame.empty and counted:
        show_check(name, f"{name}: empty")
        return
    numeric = frame.select_dtypes("number")
    one_seed = frame["n"] < 2 if "n" in frame else pd.Series(False, index=frame.index)
    rules = []
    for column in numeric:
        values = numeric[column]
        if str(column) in INTERVAL_COLUMNS:
            values = values[~one_seed]
        if not (nan_ok is True or str(column) in {str(c) for c in (nan_ok or ())}):
            _require(values.notna().all(), name, f"column {column!r} holds NaN: {values[values.isna()].index.tolist()}")
        finite = values.dropna()
        _require(finite.map(math.isfinite).all(), name, f"column {column!r} holds an infinite value")
    for columns, (low, high) in _ranges(numeric, between):
        block = numeric[columns].stack().dropna()
        bad = block[(block < low) | (block > high)]
        _require(bad.empty, name, f"values outside [{low:g}, {high:g}]: {bad.to_dict()}")
        rules.append(f"{_which(columns, numeric)} in [{low:g}, {high:g}]")
    for column, values in (allowed or {}).items():
        _require(column in frame, name, f"no column {column!r} (columns: {list(frame.columns)})")
        seen = set(frame[column].dropna().tolist())
        _require(seen <= set(values), name, f"column {column!r} holds {sorted(map(str, seen - set(values)))}, "
                                            f"outside {sorted(map(str, values))}")
        rules.append(f"{column} in {{{', '.join(map(str, values))}}}")
    if ordered:
        for column in ordered:
            _require(column in frame, name, f"no column {column!r} (columns: {list(frame.columns)})")
        for left, right in zip(ordered, ordered[1:]):
            bad = frame.index[frame[left] > frame[right]]
            _require(bad.empty, name, f"{left} > {right} in rows {bad.tolist()}")
        rules.append(" <= ".join(map(str, ordered)))
    held = f"; {'; '.join(rules)}" if rules else ""
    show_check(name, f"{name}: {_rows(frame.index, labels) + ' x ' if counted else ''}{_columns(frame.columns)}{held}")


def show_check(name: str, line: str) -> None:
    """Show `line`: folded in an IPython kernel (`folded_check`), printed elsewhere."""
    from IPython import get_ipython

    if get_ipython() is None:
        print(line)
        return
    from IPython.display import display

    display(folded_check(name, line), raw=True)


def folded_check(name: str, line: str) -> dict[str, str]:
    """A mime bundle: ``<details>`` "check: `name` held" opening on `line` as HTML, and `line` as text."""
    from html import escape

    html = (f"<details><summary>check: {escape(name)} held</summary>"
            f"<pre style=\"white-space: pre-wrap\">{escape(line)}</pre></details>")
    return {"text/plain": line, "text/html": html}


def _rows(index: pd.Index, labels: bool) -> str:
    if not labels:
        return f"{len(index)} rows"
    if not any(n in FRACTION_LEVELS for n in index.names):
        return f"{len(index)} rows {_labels(index)}"
    # one row per fraction the profile runs: the rows without their fraction, once each
    at = [i for i, n in enumerate(index.names) if n in FRACTION_LEVELS]
    starred = [tuple("*" if i in at else v for i, v in enumerate(row)) if isinstance(row, tuple) else "*"
               for row in index.tolist()]
    unique = pd.Index(list(dict.fromkeys(starred)), name=None)
    unique.names = index.names
    return f"rows {_labels(unique)[:-1]}; * = each of the profile's fractions)"


def _columns(columns: pd.Index) -> str:
    if len(columns) > 1 and all(_is_fraction(c) for c in columns):
        return "columns [the profile's fractions]"
    return f"{len(columns)} columns [{', '.join(map(str, columns))}]"


def _is_fraction(label) -> bool:
    from papa.method.selection import parse_fraction

    try:
        value = parse_fraction(str(label))
    except (ValueError, ZeroDivisionError, TypeError):
        return False
    return 0 <= value <= 1


def _ranges(numeric: pd.DataFrame, between) -> list[tuple[list, Range]]:
    if between is None:
        return []
    if isinstance(between, Mapping):
        return [([c], r) for c, r in between.items() if c in numeric]
    return [(list(numeric.columns), between)]


def _which(columns: list, numeric: pd.DataFrame) -> str:
    return "every value" if len(columns) == len(numeric.columns) else ", ".join(map(str, columns))


def _labels(index: pd.Index) -> str:
    names = [str(n) for n in index.names if n is not None]
    head = f"by {', '.join(names)}: " if names else ""
    return f"({head}{', '.join(map(_label, index.tolist()))})"


def _label(value) -> str:
    return "/".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _require(ok: bool, name: str, what: str) -> None:
    if not ok:
        raise TableCheckError(f"{name}: {what}")
