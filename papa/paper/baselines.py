"""The strongest predictors that need no model, per task: the majority class, and over the vocabulary a unigram."""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


def majority_baselines(tasks: Sequence[str], *, profile: str, data_dir: str | None = None) -> pd.DataFrame:
    """Per task: the training subset's majority class scored on the profile's evaluation subset, in the task's
    metric; tasks without classes (MLM, LM) are left out."""
    from papa.runs.profiles import get_profile
    from papa.tasks.baselines import majority_baseline
    from papa.tasks.data import load_examples, resolve_data_dir
    from papa.tasks.registry import get_task

    root = resolve_data_dir(data_dir)
    rows = []
    for task in tasks:
        spec, prof = get_task(task), get_profile(profile).for_task(task)
        if spec.num_labels == 0:
            continue
        train = load_examples(spec, "train", root, limit=prof.train_limit, sample=prof.sample)
        evaluation = load_examples(spec, "eval", root, limit=prof.eval_limit, sample=prof.sample)
        rows.append(dict(task=task, metric=spec.metric, majority=majority_baseline(spec, train, evaluation),
                         train_examples=len(train), eval_examples=len(evaluation)))
    return pd.DataFrame(rows, columns=["task", "metric", "majority", "train_examples", "eval_examples"])


def chance_levels(model: str, vocab_size: int, tasks: Sequence[str], *, profile: str,
                  data_dir: str | None = None, tokenizer=None, model_type: str | None = None) -> pd.DataFrame:
    """Per (model, task), in the task's metric: ``chance`` (the majority class, or −log vocabulary size in nats)
    and, with `tokenizer`, ``context_free`` (the best unigram fit on any task's training tokens over the vocabulary)
    and ``same_tokens`` (the unigram fit on the task's own), each with a ``*_how`` naming it."""
    from papa.method.models import canonical_model_name
    from papa.tasks.registry import get_task

    baselines = majority_baselines(tasks, profile=profile, data_dir=data_dir).set_index("task")
    model = canonical_model_name(model)
    over_vocabulary = [t for t in tasks if not get_task(t).num_labels]
    targets = {t: _targets(t, tokenizer, model_type, profile=profile, data_dir=data_dir)
               for t in over_vocabulary} if tokenizer is not None else {}
    rows = []
    for task in tasks:
        spec = get_task(task)
        if spec.num_labels:
            chance = float(baselines.loc[task, "majority"])
            how = "majority class of the training subset"
            rows.append(dict(model=model, task=task, metric=spec.metric, chance=chance, how=how, context_free=chance,
                             context_free_how=how, same_tokens=chance, same_tokens_how=how))
            continue
        row = dict(model=model, task=task, metric=spec.metric, chance=-math.log(vocab_size),
                   how=f"uniform over the {vocab_size:,}-token vocabulary", context_free=math.nan, context_free_how="",
                   same_tokens=math.nan, same_tokens_how="")
        if targets:
            row.update(unigram_levels(task, targets, vocab_size))
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "task", "metric", "chance", "how", "context_free", "context_free_how",
                                       "same_tokens", "same_tokens_how"]).set_index(["model", "task"])


def unigram_levels(task: str, targets: dict[str, tuple[list[int], list[int]]], vocab_size: int) -> dict:
    """`task`'s unigram baselines on its evaluation tokens: fit on its own training tokens (``same_tokens``) and the
    best fit on any task's (``context_free``)."""
    from papa.tasks.baselines import unigram_baseline

    fits = {}
    for source, (train, _) in targets.items():
        score, k = unigram_baseline(train, targets[task][1], vocab_size)
        whose = "the training subset's" if source == task else f"the {source} task's training subset's"
        fits[source] = (score, f"unigram of {whose} {len(train):,} target tokens (add-{k:.3g} smoothing)")
    best = max(fits, key=lambda source: fits[source][0])
    return dict(context_free=fits[best][0], context_free_how=fits[best][1], same_tokens=fits[task][0],
                same_tokens_how=fits[task][1])


def _targets(task: str, tokenizer, model_type: str | None, *, profile: str,
             data_dir: str | None) -> tuple[list[int], list[int]]:
    """The target tokens of `task`'s training and evaluation subsets, as the profile's probe gets them."""
    from papa.probing.features import encode_task
    from papa.probing.probes import IGNORE_INDEX
    from papa.runs.profiles import get_profile
    from papa.tasks.data import load_examples, resolve_data_dir
    from papa.tasks.registry import get_task

    spec, prof = get_task(task), get_profile(profile).for_task(task)
    root = resolve_data_dir(data_dir)
    targets = []
    for split, limit in (("train", prof.train_limit), ("eval", prof.eval_limit)):
        examples = load_examples(spec, split, root, limit=limit, sample=prof.sample)
        labels = encode_task(tokenizer, spec, examples, max_length=spec.hparams.max_length,
                             model_type=model_type).labels
        targets.append(labels[labels != IGNORE_INDEX].tolist())
    return targets[0], targets[1]
