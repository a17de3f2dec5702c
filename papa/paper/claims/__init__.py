"""The paper's claims read on a run: per claim a verdict, its rule, our numbers and the figure that shows it.

Each claim (`papa.paper.paper_numbers.CLAIMS`) is cut into the parts it asserts, each read on ``results.csv`` with
the paired statistics of `papa.runs.statistics`.
"""
from __future__ import annotations

from papa.paper.claims.notes import (CPU_RUN_RESULTS, SectionClaims, claim_table, format_claims, headed_claims,
                                     notebook_models, profile_uncertainty_note, smoke_run_first, smoke_run_note,
                                     stability_note, uncertainty_note, unread_rankings)
from papa.paper.claims.rules import ClaimReading, Part
from papa.paper.claims.run_tables import RunLike, RunTables, learns_tables, read_tables
from papa.runs.statistics import VERDICTS

__all__ = ["VERDICTS", "ClaimReading", "Part", "RunTables", "RunLike", "read_tables", "learns_tables",
           "SectionClaims", "format_claims", "claim_table", "headed_claims", "uncertainty_note",
           "profile_uncertainty_note", "notebook_models", "smoke_run_note", "smoke_run_first", "stability_note",
           "unread_rankings", "CPU_RUN_RESULTS"]
