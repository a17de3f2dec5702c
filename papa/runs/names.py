"""Names shared by the CLI and the library without heavy imports: the file names of constants and rankings."""
from __future__ import annotations

import re

from papa.core.vocabulary import DEFAULT_DTYPE


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(s)).strip("-")


def _dtype_suffix(dtype: str) -> str:
    # Only a non-default dtype is named, so that the files made before dtypes were recorded keep their names.
    return "" if dtype == DEFAULT_DTYPE else f"-{_slug(dtype)}"


def constants_filename(model_name: str, corpus: str, max_length: int, layout: str, kind: str = "average",
                       dtype: str = DEFAULT_DTYPE) -> str:
    """<model>__<corpus>__<kind>-<layout>-n<N>[-<dtype>].safetensors (the dtype only when not float32)"""
    return f"{_slug(model_name)}__{_slug(corpus)}__{kind}-{layout}-n{max_length}{_dtype_suffix(dtype)}.safetensors"


def ranking_filename(model_name: str, task: str, constants: str, corpus: str, max_length: int, profile: str,
                     layout: str, dtype: str = DEFAULT_DTYPE) -> str:
    """<model>__<task>__lambda-<constants>-<corpus>-<layout>-n<N>-<profile>[-<dtype>].safetensors"""
    return (f"{_slug(model_name)}__{_slug(task)}__lambda-{_slug(constants)}-{_slug(corpus)}-{_slug(layout)}"
            f"-n{max_length}-{_slug(profile)}{_dtype_suffix(dtype)}.safetensors")
