"""The one vocabulary of papa: every closed set of names that more than one module (or the CLI) uses.

Each tuple is the single owner of its names; modules validate against it and the CLI takes its ``choices=`` from it.
Nothing here imports torch, so ``papa --help`` stays light.
"""
from __future__ import annotations

# How a limit picks its examples (papa.tasks.data.load_examples): the file's first ones, or a fixed random subset.
SAMPLES = ("first", "random")
