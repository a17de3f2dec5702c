"""Names shared by the CLI and the library without heavy imports: the file names of constants and rankings.

A name spells the model's name and only the settings that differ from the protocol's.
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
    """What names a λ ranking's file."""

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
        [-seed<S>].safetensors`, bracketed parts only where not the protocol's."""
        suffix = (_dtype_suffix(self.dtype)
                  + ("" if self.probe_inputs == PAPER_PROBE_INPUTS else f"-{_slug(self.probe_inputs)}")
                  + ("" if self.part == 0 else f"-part{self.part}") + ("" if self.seed == 0 else f"-seed{self.seed}"))
        return (f"{_slug(model_file_name(self.model))}__{_slug(self.task)}__lambda-{_slug(self.constants)}-"
                f"{_slug(self.corpus)}-{_slug(self.layout)}-n{self.max_length}-{_slug(self.profile)}{suffix}"
                ".safetensors")


def corpus_slug(corpus: str) -> str:
    """A corpus as constants file names spell it."""
    return _slug(corpus)
