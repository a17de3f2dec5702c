"""Every claim of the paper, read section by section: the one list of the sections that read claims."""
from __future__ import annotations

from papa.paper.claims.reading import in_paper_order
from papa.paper.claims.rules import ClaimReading
from papa.paper.claims.run_tables import RunTables
from papa.sections import (alternative_matrices, constant_patterns, data_dependence, head_selection, main_results,
                           mlm_electra)

#: The sections whose notebooks read claims of the paper, in the paper's order.
CLAIM_SECTIONS = (main_results, constant_patterns, alternative_matrices, data_dependence, head_selection, mlm_electra)


def read_claims(run: RunTables) -> list[ClaimReading]:
    """Every claim of the paper read on a run's tables, in the paper's order, each with its decoder line."""
    return in_paper_order(r for section in CLAIM_SECTIONS for r in section.read(run))
