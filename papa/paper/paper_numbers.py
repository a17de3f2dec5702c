"""What the paper reports, copied from its tables and text, to print beside our numbers.

Tables 1/4 and 2/5 are RoBERTa-base/-large; the figures give no numbers, so their claims are kept as sentences.
"""
from __future__ import annotations

import pandas as pd

# Keys are papa's constants kinds ("none" = the original model, fraction 1).
_TASKS_T1 = ("cola", "mrpc", "sst2", "mnli", "ner", "pos")
_TABLE1 = {  # RoBERTa-base (Table 1)
    "none": (0.47, 0.85, 0.91, 0.78, 0.92, 0.93),
    "identity": (0.04, 0.80, 0.80, 0.63, 0.55, 0.87),
    "toeplitz": (0.08, 0.81, 0.79, 0.65, 0.77, 0.90),
    "zeros": (0.09, 0.80, 0.80, 0.66, 0.57, 0.87),
    "trainable_toeplitz": (0.08, 0.81, 0.79, 0.68, 0.78, 0.91),
    "trainable_average": (0.34, 0.81, 0.87, 0.72, 0.89, 0.93),
    "average": (0.31, 0.82, 0.87, 0.69, 0.89, 0.93),
}
_TABLE4 = {  # RoBERTa-large (Table 4)
    "none": (0.53, 0.87, 0.93, 0.81, 0.93, 0.93),
    "identity": (0.09, 0.72, 0.80, 0.65, 0.56, 0.87),
    "toeplitz": (0.11, 0.79, 0.80, 0.65, 0.74, 0.89),
    "zeros": (0.09, 0.80, 0.81, 0.66, 0.57, 0.87),
    "trainable_toeplitz": (0.11, 0.78, 0.80, 0.68, 0.75, 0.89),
    "trainable_average": (0.35, 0.81, 0.88, 0.73, 0.91, 0.93),
    "average": (0.34, 0.81, 0.85, 0.68, 0.89, 0.92),
}
_TASKS_T2 = ("cola", "mrpc", "sst2", "ner", "pos")
_TABLE2 = {"task": (0.31, 0.82, 0.87, 0.89, 0.93), "mnli": (0.32, 0.81, 0.87, 0.89, 0.93)}  # RoBERTa-base
_TABLE5 = {"task": (0.34, 0.80, 0.85, 0.89, 0.92), "mnli": (0.35, 0.81, 0.85, 0.88, 0.92)}  # RoBERTa-large

CLAIMS = {
    "fig2_half": "Replacing half of the attention matrices leads to no major drop; sometimes performance improves.",
    "fig2_all": "Replacing all attention matrices costs 8% relative performance on average, never more than 20%.",
    "fig3": "Better-performing models lose more when all heads are replaced: they use attention more.",
    "fig4_diagonal": "About 90% of constant matrices show a diagonal pattern (a token attends to itself or neighbours).",
    "fig4_special": "About 40% of heads put most of their mass on [CLS] and/or [SEP].",
    "fig4_spread": "In most heads the mass of a row is spread over several tokens rather than one.",
    "table1": "Average constants beat every data-free matrix (identity, Toeplitz, zeros) on every task, beat "
              "trained Toeplitz-initialised constants, and are close to trained average-initialised ones.",
    "table2": "Constants from MNLI do as well as constants from the task's own training set.",
    "fig5": "The λ ranking beats first→last, last→first and random at every fraction; reversed λ is the worst.",
    "fig6": "MLM drops more than downstream tasks for MLM-pretrained models (1-1.5 nats of log perplexity, from "
            "about -2); ELECTRA starts lower on MLM (-3.51) and drops only 0.44, like its downstream behaviour.",
}
PAPER_AVERAGE_RELATIVE_DROP = 0.08
PAPER_MAX_RELATIVE_DROP = 0.20
PAPER_DIAGONAL_SHARE = 0.90  # Fig. 4: "about 90%" of constant matrices are diagonal
PAPER_SPECIAL_SHARE = 0.40   # Fig. 4: "about 40%" put most of their mass on [CLS]/[SEP]


def _frame(table: dict, tasks: tuple[str, ...], index_name: str) -> pd.DataFrame:
    df = pd.DataFrame.from_dict(table, orient="index", columns=list(tasks))
    df.index.name = index_name
    return df


def alternative_matrices(size: str = "base") -> pd.DataFrame:
    """Table 1 (``size="base"``) or Table 4 (``"large"``): rows are constants kinds, columns tasks."""
    return _frame(_pick(size, _TABLE1, _TABLE4), _TASKS_T1, "constants")


def data_dependence(size: str = "base") -> pd.DataFrame:
    """Table 2 (``"base"``) or Table 5 (``"large"``): rows ``task`` (own training set) and ``mnli``."""
    return _frame(_pick(size, _TABLE2, _TABLE5), _TASKS_T2, "constants_corpus")


def _pick(size: str, base: dict, large: dict) -> dict:
    if size not in ("base", "large"):
        raise ValueError(f"the paper reports RoBERTa 'base' and 'large'; got {size!r}")
    return base if size == "base" else large


def relative_drops(size: str = "base") -> pd.Series:
    """Table 1 (or 4): each task's relative drop (original − average) / original with every head replaced, and
    their mean (``"average"``); CoLA alone loses over 20%, so Sec. 4.2's bound is on a model's average."""
    table = alternative_matrices(size)
    drops = (table.loc["none"] - table.loc["average"]) / table.loc["none"]
    return pd.concat([drops, pd.Series({"average": drops.mean()})])


def paper_score(task: str, kind: str = "none", size: str = "base") -> float | None:
    """`task`'s score in Table 1 (or 4) with constants `kind` (``"none"``: the original model), on papa's scale
    (fractions: accuracy 0.91); None where the table has no such task or row."""
    table = alternative_matrices(size)
    if task not in table.columns or kind not in table.index:
        return None
    return float(table.loc[kind, task])


def performance_vs_drop_points() -> pd.DataFrame:
    """Fig. 3's points for RoBERTa-base and -large (the only models the paper gives numbers for): ``original``
    (mean score over the six tasks), ``relative_drop`` (`relative_drops`' mean) and ``source``, by ``model``."""
    rows = {f"RoBERTa-{size}": {"original": float(alternative_matrices(size).loc["none"].mean()),
                                "relative_drop": float(relative_drops(size)["average"]), "source": source}
            for size, source in (("base", "Table 1"), ("large", "Table 4"))}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "model"
    return table
