"""Names shared by the CLI and the library without heavy imports: the file names of constants and rankings.

A file is named after the model's *name*, never where it lies (`papa.core.model_names.model_file_name`). A name
spells the settings that set its file apart from the paper's protocol and the grid's own (a dtype other than
float32, a probe that reads standardised inputs, another training part or λ seed) and leaves the protocol's out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from papa.core.model_names import model_file_name
from papa.core.vocabulary import DEFAULT_DTYPE, PAPER_PROBE_INPUTS

__all__ = ["RankingName", "constants_filename", "corpus_slug", "model_file_name"]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(s)).strip("-")


def _dtype_suffix(dtype: str) -> str:
    return "" if dtype == DEFAULT_DTYPE else f"-{_slug(dtype)}"


def constants_filename(model_name: str, corpus: str, max_length: int, layout: str, kind: str = "average",
                       dtype: str = DEFAULT_DTYPE) -> str:
    """`<model>__<corpus>__<kind>-<layout>-n<N>[-<dtype>].safetensors` (the dtype only when not float32); <model> is
    `model_file_name`'s."""
    return (f"{_slug(model_file_name(model_name))}__{_slug(corpus)}__{kind}-{layout}-n{max_length}"
            f"{_dtype_suffix(dtype)}.safetensors")


@dataclass(frozen=True)
class RankingName:
    """What names a λ ranking's file: the model (its name), the task, the constants kind and corpus λ learned over,
    the length, the profile that learned it, the layout and dtype, the probe's inputs, λ's seed and the disjoint
    training part it learned on (0: the grid's own subset)."""

    model: str
    task: str
    constants: str
    corpus: str
    max_length: int
    profile: str
    layout: str
    dtype: str = DEFAULT_DTYPE
    probe_inputs: str = PAPER_PROBE_INPUTS
    seed: int = 0
    part: int = 0

    def __post_init__(self) -> None:
        for name in ("seed", "part"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"a ranking's {name} must be an integer, got {value!r}.")

    @property
    def filename(self) -> str:
        """`<model>__<task>__lambda-<constants>-<corpus>-<layout>-n<N>-<profile>[-<dtype>][-<inputs>][-part<P>]
        [-seed<S>].safetensors`, each bracketed part only where it is not the protocol's (float32, raw inputs,
        part 0, seed 0); <model> is `model_file_name`'s."""
        suffix = (_dtype_suffix(self.dtype)
                  + ("" if self.probe_inputs == PAPER_PROBE_INPUTS else f"-{_slug(self.probe_inputs)}")
                  + ("" if self.part == 0 else f"-part{self.part}") + ("" if self.seed == 0 else f"-seed{self.seed}"))
        return (f"{_slug(model_file_name(self.model))}__{_slug(self.task)}__lambda-{_slug(self.constants)}-"
                f"{_slug(self.corpus)}-{_slug(self.layout)}-n{self.max_length}-{_slug(self.profile)}{suffix}"
                ".safetensors")


def corpus_slug(corpus: str) -> str:
    """A corpus as constants file names spell it."""
    return _slug(corpus)
