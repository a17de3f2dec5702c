"""The paper's claims read off a run's results: per claim a verdict, the rule behind it, our numbers and the figure
(or table) that shows it. `papa reproduce` ends with `format_claims` of what it just computed, and the docs' claim
pages are generated from it (docs/claim_pages.py).

Each claim is the paper's sentence (`papa.paper.paper_numbers.CLAIMS`) cut into the parts it asserts; every part is
read on the rows of ``<out>/results.csv`` with the paired statistics of `papa.runs.statistics` (runs with the same
seed compared seed by seed; the evaluation examples resampled where the run stored its predictions).

The modules, one per figure or table (and its section notebook), above the machinery they share:

* `rules`: parts, readings, Holm's correction, verdicts, the margins and `RULES`;
* `scores`: the run's numbers (`ClaimRun`), the draws of a head order and the contrasts between them;
* `main_results` (Figs. 2 and 3, notebook 02), `constant_patterns` (Fig. 4, 03), `alternative_matrices` (Table 1,
  04), `data_dependence` (Table 2, 05), `head_selection` (Fig. 5, 06), `mlm_electra` (Fig. 6, 07), `decoders`
  (the causal LMs, 08);
* `run_tables`: a run's tables as the claims, their notes and the pages read them, read once (`RunTables`);
* `leave_one_out`: a run read again with one evaluation example left out of every run (`leave_one_out`), under
  which no verdict may move;
* `reading`: every claim read on a run (`read_claims`, `run_claims`, `profile_claims`) and Fig. 5's comparisons
  (`profile_selection_comparisons`);
* `notes`: the claims as text (`format_claims`, `section_claims`) and the notes above them.

The names the notebooks, the pages and the CLI use are importable from `papa.paper.claims` itself; the machinery the
modules share (`rules`, `scores`) from the module that owns it.
"""
from __future__ import annotations

from papa.paper.claims.constant_patterns import FIG4
from papa.paper.claims.decoders import DECODER_EVIDENCE, DECODER_NOTEBOOK, decoder_models
from papa.paper.claims.mlm_electra import DECODER_POINTS, OBJECTIVE_NAMES, PAPER_MLM_NATS
from papa.paper.sections import MLM_PRETRAINED, unread_objectives
from papa.paper.claims.notes import (CPU_RUN_RESULTS, claim_table, format_claims, headed_claims, notebook_models,
                                     profile_uncertainty_note, section_claim_table, section_claims, smoke_run_first,
                                     smoke_run_note, stability_note, uncertainty_note, unread_rankings)
from papa.paper.claims.leave_one_out import leave_one_out
from papa.paper.claims.head_selection import SelectionComparison, comparison_table, selection_comparisons
from papa.paper.claims.reading import profile_claims, profile_selection_comparisons, read_claims, run_claims
from papa.paper.claims.run_tables import RunLike, RunTables, learns_tables, read_tables
from papa.paper.claims.rules import (ALIKE_MARGIN, AVERAGE_MARGIN, CLOSE_MARGIN, FIG3_MODELS, HALF_MARGIN,
                                     LAMBDA_CLAIMS, MARGIN_SOURCES, RANKINGS, RELATIVE_MARGIN,
                                     RULES, SPREAD_THRESHOLD, STABLE_RHO, ClaimReading, Part)
from papa.paper.claims.scores import DRAWN_ORDERS
from papa.runs.statistics import VERDICTS

__all__ = ["VERDICTS", "RULES", "MARGIN_SOURCES", "ClaimReading", "Part", "RunTables", "RunLike", "leave_one_out", "read_claims", "run_claims",
           "learns_tables", "notebook_models", "unread_rankings",
           "format_claims", "smoke_run_note", "smoke_run_first", "read_tables",
           "profile_claims", "section_claims", "headed_claims", "uncertainty_note", "profile_uncertainty_note",
           "stability_note", "SelectionComparison", "selection_comparisons", "comparison_table",
           "profile_selection_comparisons", "unread_objectives"]
