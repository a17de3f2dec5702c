"""Names shared by the CLI and the library without heavy imports: the file names of constants and rankings."""
from __future__ import annotations

import re


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(s)).strip("-")


def constants_filename(model_name: str, corpus: str, max_length: int, layout: str, kind: str = "average") -> str:
    """<model>__<corpus>__<kind>-<layout>-n<N>.safetensors"""
    return f"{_slug(model_name)}__{_slug(corpus)}__{kind}-{layout}-n{max_length}.safetensors"


def ranking_filename(model_name: str, task: str, constants: str, corpus: str, max_length: int, profile: str,
                     layout: str) -> str:
    """<model>__<task>__lambda-<constants>-<corpus>-<layout>-n<N>-<profile>.safetensors"""
    return (f"{_slug(model_name)}__{_slug(task)}__lambda-{_slug(constants)}-{_slug(corpus)}-{_slug(layout)}"
            f"-n{max_length}-{_slug(profile)}.safetensors")
