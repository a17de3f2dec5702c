"""Names shared by the CLI and the library without heavy imports: the file names of constants and rankings.

A file is named after the model's *name*, never where it lies (`papa.core.model_names.model_file_name`). Files that
older versions named by the whole path are still found: `existing_file` tries each name `constants_filenames` /
`ranking_filenames` give, the current one first.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from papa.core.model_names import model_file_name
from papa.core.vocabulary import DEFAULT_DTYPE, PAPER_PROBE_INPUTS

__all__ = ["constants_filename", "constants_filenames", "corpus_slug", "existing_file", "model_file_name",
           "ranking_filename", "ranking_filenames"]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(s)).strip("-")


def _dtype_suffix(dtype: str) -> str:
    # Only a non-default dtype is named, so that the files made before dtypes were recorded keep their names.
    return "" if dtype == DEFAULT_DTYPE else f"-{_slug(dtype)}"


def constants_filename(model_name: str, corpus: str, max_length: int, layout: str, kind: str = "average",
                       dtype: str = DEFAULT_DTYPE) -> str:
    """`<model>__<corpus>__<kind>-<layout>-n<N>[-<dtype>].safetensors` (the dtype only when not float32); <model> is
    `model_file_name`'s."""
    return _constants_name(model_file_name(model_name), corpus, max_length, layout, kind, dtype)


def ranking_filename(model_name: str, task: str, constants: str, corpus: str, max_length: int, profile: str,
                     layout: str, dtype: str = DEFAULT_DTYPE, seed: int = 0, part: int = 0) -> str:
    """`<model>__<task>__lambda-<constants>-<corpus>-<layout>-n<N>-<profile>[-<dtype>][-part<P>][-seed<S>]
    .safetensors` (the dtype only when not float32, the disjoint training part λ learned on only when not the grid's
    own, the seed λ learned with only when not 0); <model> is `model_file_name`'s."""
    return _ranking_name(model_file_name(model_name), task, constants, corpus, max_length, profile, layout, dtype,
                         seed, part=part)


def constants_filenames(model_name: str, *args, given: str | None = None, **kwargs) -> list[str]:
    """`constants_filename`, then the name older papa versions gave the same file (the model's whole path, as
    `given`: the model argument as the user gave it, where `model_name` is the recorded name)."""
    return _with_legacy(model_name, given, _constants_name, *args, **kwargs)


def ranking_filenames(model_name: str, *args, given: str | None = None, **kwargs) -> list[str]:
    """`ranking_filename`, then the name older papa versions gave the same file (the model's whole path, as
    `given`)."""
    return _with_legacy(model_name, given, _ranking_name, *args, **kwargs)


def existing_file(directory: str | os.PathLike, names: list[str]) -> Path:
    """The first of `names` that is a file in `directory`, else the first (where a new file is to be written)."""
    for name in names:
        if (Path(directory) / name).is_file():
            return Path(directory) / name
    return Path(directory) / names[0]


def _with_legacy(model_name: str, given: str | None, build, *args, **kwargs) -> list[str]:
    names = [build(model_file_name(model_name), *args, **kwargs),
             build(str(given if given is not None else model_name), *args, **kwargs)]
    return list(dict.fromkeys(names))


def corpus_slug(corpus: str) -> str:
    """A corpus as constants file names spell it."""
    return _slug(corpus)


def _constants_name(model: str, corpus: str, max_length: int, layout: str, kind: str = "average",
                    dtype: str = DEFAULT_DTYPE) -> str:
    return f"{_slug(model)}__{_slug(corpus)}__{kind}-{layout}-n{max_length}{_dtype_suffix(dtype)}.safetensors"


def _ranking_name(model: str, task: str, constants: str, corpus: str, max_length: int, profile: str, layout: str,
                  dtype: str = DEFAULT_DTYPE, seed: int = 0, probe_inputs: str = PAPER_PROBE_INPUTS,
                  part: int = 0) -> str:
    for name, value in (("seed", seed), ("part", part)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"a ranking's {name} must be an integer, got {value!r}.")
    # Only another seed than the grid's (0), or another part of the data, is named, so that the grid's rankings keep
    # their names.
    seed_suffix = ("" if part == 0 else f"-part{part}") + ("" if seed == 0 else f"-seed{seed}")
    # Likewise only a probe that reads standardised inputs (papa.probing.standardize).
    inputs_suffix = "" if probe_inputs == PAPER_PROBE_INPUTS else f"-{_slug(probe_inputs)}"
    return (f"{_slug(model)}__{_slug(task)}__lambda-{_slug(constants)}-{_slug(corpus)}-{_slug(layout)}"
            f"-n{max_length}-{_slug(profile)}{_dtype_suffix(dtype)}{inputs_suffix}{seed_suffix}.safetensors")
