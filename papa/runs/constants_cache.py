"""Average constants as files: extracted once per (model, corpus, length, layout, dtype), saved, and reloaded.

`cached_average_constants` serves the grids, `extract_to_file` serves `papa extract`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from papa.core import distributed
from papa.core.artifacts import check_output_dir
from papa.core.errors import InputError, PapaError
from papa.core.progress import tqdm
from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.core.vocabulary import DEFAULT_DTYPE
from papa.method.constants import ConstantMatrices, load_constants
from papa.method.extract import check_length, extract_constants
from papa.method.layout import layout_for
from papa.method.models import (canonical_model_name, check_model_name, dtype_name, is_causal_model, load_model,
                                local_config, resolve_device, resolve_dtype)
from papa.runs.names import constants_filename, corpus_slug
from papa.tasks.corpus import Corpus, CorpusSource, corpus_name, task_corpus
from papa.tasks.data import check_task_files
from papa.tasks.registry import get_task


@dataclass(frozen=True)
class ConstantsSource:
    """Which average constants a grid uses: `corpus_task`'s training inputs (`limit` of them, picked by `sample`),
    encoded as that task's inputs are, at `max_length` in `layout`."""

    corpus_task: str
    limit: int | None
    max_length: int
    layout: str
    sample: str = "first"

    @property
    def corpus(self) -> str:
        """The corpus as the constants record it (``sst2:train[:96]``)."""
        return corpus_name(self.corpus_task, "train", self.limit, self.sample)

    @property
    def token_task(self) -> bool:
        """Whether the corpus is encoded with the token-task rule (a token-level task's: `papa.method.layout`)."""
        return get_task(self.corpus_task).token_level

    def load(self, data_dir: Path | str | None = None) -> Corpus:
        """The corpus's texts, in the order they are averaged (`data_dir` None: $PAPA_DATA_DIR, else the hub)."""
        return task_corpus(self.corpus_task, "train", data_dir=data_dir, limit=self.limit, sample=self.sample)


def record_dtype(constants: ConstantMatrices, dtype: str) -> ConstantMatrices:
    """`constants` whose metadata names the dtype the model ran in while they were averaged."""
    return ConstantMatrices(matrices=constants.matrices, counts=constants.counts,
                            metadata=replace(constants.metadata, dtype=dtype))


def cached_average_constants(model, tokenizer, signature, source: ConstantsSource, *,
                             folder: RunFolder, resources: Resources = Resources(),
                             force: bool = False) -> ConstantMatrices:
    """Average constants of `source`: loaded from the run folder's ``constants/`` if there (and made for this model,
    length and layout), else extracted and saved there; the file names the model's dtype unless float32. The corpus is
    encoded as its own task's inputs are, whatever task the constants then serve."""
    dtype = dtype_name(next(model.parameters()).dtype)
    name = constants_filename(signature.model_name, source.corpus, source.max_length, source.layout, dtype=dtype)
    path = folder.constants / name
    progress = resources.progress
    if distributed.main_decides(path.is_file() and not force):
        constants = load_constants(path)
        constants.check_compatible(signature, max_length=source.max_length, layout=source.layout)
        if progress:
            tqdm.write(f"constants: read {path} ({constants.metadata.num_examples} examples of {source.corpus})")
        return constants
    if progress:
        for other in _other_corpora(path.parent, name, source.corpus):
            tqdm.write(f"constants: {other} averages another corpus than {source.corpus}, the one this grid's "
                       "protocol uses: give it as the constants file to use it instead")
    constants = record_dtype(extract_constants(model, tokenizer, source.load(resources.data_dir),
                                               max_length=source.max_length, layout=source.layout,
                                               token_task=source.token_task, model_name=signature.model_name,
                                               progress=progress), dtype)
    if distributed.is_main():
        constants.save(path)
        if progress:
            tqdm.write(f"constants: extracted {constants.metadata.num_examples} examples of {source.corpus} -> "
                       f"{path}")
    return constants


def _other_corpora(folder: Path, name: str, corpus: str) -> list[Path]:
    """Files in `folder` named as `name` (the same model, kind, layout, length and dtype) but over another corpus."""
    pattern = name.replace(f"__{corpus_slug(corpus)}__", "__*__", 1)
    return sorted(p for p in folder.glob(pattern) if p.name != name) if pattern != name else []


def extract_to_file(model: str, source: CorpusSource, *, max_length: int, into: str | os.PathLike,
                    layout: str | None = None, dtype: str = DEFAULT_DTYPE, batch_size: int = 32,
                    resources: Resources = Resources()) -> tuple[ConstantMatrices, Path | None, float]:
    """Extract `model`'s average constants of `source` and write them into the folder `into`; returns them, their path
    (None but on the main process) and the seconds the extraction took. Every setting is checked, cheapest first, before
    any data or weights are read."""
    check_model_name(model)  # a folder that is not there: refused before anything slower
    source.check()
    if not source.is_file:
        check_task_files(source.name, (source.split,), resources.data_dir)
    check_output_dir(into)
    resolve_device(resources.device)
    dtype = dtype_name(resolve_dtype(dtype))
    check_length_here(model, max_length)
    causal = is_causal_model(model)
    if causal is not None and layout is not None:
        layout_for(causal, layout, layout)  # refuses a separator-last layout for a decoder
    corpus = source.load(resources.data_dir)
    loaded, tokenizer = load_model(model, device=distributed.process_device(resources.device), dtype=dtype)
    name = canonical_model_name(model)
    start = time.perf_counter()
    constants = record_dtype(extract_constants(loaded, tokenizer, corpus, max_length=max_length, layout=layout,
                                               token_task=source.token_task, model_name=name,
                                               progress=resources.progress, batch_size=batch_size), dtype)
    seconds = time.perf_counter() - start
    if not distributed.is_main():  # under `accelerate launch`: every process holds the summed constants
        return constants, None, seconds
    path = constants.save(Path(into) / constants_filename(name, corpus.name, max_length,
                                                             constants.metadata.layout, dtype=dtype))
    return constants, path, seconds


def check_length_here(model: str, max_length: int) -> None:
    """`check_length` from the model's config alone, when that is on this machine."""
    config = local_config(model)
    if config is None:
        return
    try:
        check_length(config, max_length)
    except InputError:
        raise
    except PapaError:  # an unsupported model: `load_model` says so in its own words
        return
