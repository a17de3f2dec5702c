"""The paper's section notebooks in order, their modules, what each runs, and every claim read over them."""
from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from pathlib import Path
from types import ModuleType

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NOTEBOOKS
from papa.paper.claims import notes, reading
from papa.paper.claims.rules import ClaimReading
from papa.paper.claims.run_tables import RunLike
from papa.paper.grids import Grids
from papa.sections import (alternative_matrices, constant_patterns, data_dependence, decoders, head_selection,
                           main_results, method, mlm_electra)
from papa.sections.every_claim import read_claims

#: Notebook name -> its section's module, in the paper's order.
SECTIONS: dict[str, ModuleType] = dict(zip(NOTEBOOKS, (method, main_results, constant_patterns, alternative_matrices,
                                                       data_dependence, head_selection, mlm_electra, decoders)))

#: Notebook parameters that the declarations take under another name.
_ARGUMENTS = {"out_dir": "folder"}


def section_grids(name: str, parameters: Mapping[str, object]) -> dict[str, Grids]:
    """The grids notebook `name` runs with its parameter cell's `parameters` ({} for a notebook without grids)."""
    declare = getattr(SECTIONS.get(name), "grids", None)
    if declare is None:
        return {}
    parameters = {_ARGUMENTS.get(p, p): value for p, value in parameters.items()}
    if parameters.get("folder") is not None:  # a notebook's out_dir: the run folder its declaration reads
        parameters["folder"] = RunFolder.at(parameters["folder"])
    wanted = inspect.signature(declare).parameters
    missing = [p for p, v in wanted.items() if v.default is inspect.Parameter.empty and p not in parameters]
    if missing:
        raise ValueError(f"notebook {name}'s grids need the parameters {', '.join(missing)}")
    return declare(**{p: parameters[p] for p in wanted if p in parameters})


def run_claims(run: RunLike, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run's rows of `profile`, `layout`, `dtype` and `probe_inputs` where given."""
    return reading.run_claims(run, read_claims, profile=profile, layout=layout, dtype=dtype,
                              probe_inputs=probe_inputs)


def profile_claims(run: RunLike, profile: str | Path, notebooks: Collection[str] | None = None
                   ) -> list[ClaimReading]:
    """`read_claims` on the rows a run of `profile` made; only `notebooks`' claims when given."""
    return reading.profile_claims(run, profile, read_claims, notebooks)


def section_claims(run: RunLike, profile: str | Path, notebook: str) -> str:
    """What notebook `notebook`'s closing cell prints for its claims."""
    return notes.section_claims(run, profile, notebook, read_claims)
