"""Where the authors' released preprocessing (the ``official`` layout) and papa's own (``sep_last``) differ.

Slots side by side (`layout_comparison`), tokens dropped (`cut_tokens`), and inputs truncated per task and split
(`truncation_counts`): the released GLUE script also cuts single sentences at n/2.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import pandas as pd

from papa.core.errors import check_one_of
from papa.core.vocabulary import SPLITS
from papa.method.layout import LAYOUTS, encode, model_positions

COMPARED = ("official", "sep_last")


def _as_input(text, token_task: bool):
    """Word lists stay lists; a text of a token task is split on spaces into words, as CoNLL data comes."""
    return text.split() if token_task and isinstance(text, str) else text


def layout_comparison(tokenizer, text, pair: str | None = None, *, max_length: int, model_type: str,
                      token_task: bool = False, layouts: Sequence[str] = COMPARED) -> pd.DataFrame:
    """One row per slot: in each layout, the token there, whether it is attended, and the position the model gives
    it; `token_task` encodes `text` as words (split on spaces if a string)."""
    text = _as_input(text, token_task)
    columns = {}
    for layout in layouts:
        batch = encode(tokenizer, [text], None if pair is None else [pair], max_length=max_length, layout=layout,
                       model_type=model_type, token_task=token_task)
        ids = batch.inputs["input_ids"][0]
        columns[f"{layout} token"] = tokenizer.convert_ids_to_tokens(ids.tolist())
        columns[f"{layout} mask"] = batch.inputs["attention_mask"][0].tolist()
        columns[f"{layout} position"] = model_positions(batch.inputs, model_type,
                                                        tokenizer.pad_token_id)[0].tolist()
    table = pd.DataFrame(columns)
    table.index.name = "slot"
    return table


def cut_tokens(tokenizer, text, pair: str | None = None, *, max_length: int, model_type: str,
               token_task: bool = False, layouts: Sequence[str] = COMPARED) -> pd.DataFrame:
    """Per layout and segment: how many of the segment's tokens the input keeps, and the tokens it drops."""
    # Every layout trims a segment at its end: the runs of non-special tokens are the kept prefixes.
    text = _as_input(text, token_task)
    segments = [text] if pair is None else [text, pair]
    special = set(tokenizer.all_special_ids)
    rows = []
    for layout in layouts:
        batch = encode(tokenizer, [text], None if pair is None else [pair], max_length=max_length, layout=layout,
                       model_type=model_type, token_task=token_task)
        real = [token for token, attended in zip(batch.inputs["input_ids"][0].tolist(),
                                                  batch.inputs["attention_mask"][0].tolist()) if attended]
        runs = [list(run) for is_text, run in groupby(real, key=lambda token: token not in special) if is_text]
        whole = _segment_tokens(tokenizer, segments, layout, model_type, token_task)
        for i, full in enumerate(whole):
            kept = len(runs[i]) if i < len(runs) else 0
            rows.append({"layout": layout, "segment": "first" if i == 0 else "second", "tokens": len(full),
                         "kept": kept, "dropped": " ".join(tokenizer.convert_ids_to_tokens(full[kept:]))})
    return pd.DataFrame(rows)


def _segment_tokens(tokenizer, segments, layout: str, model_type: str, token_task: bool) -> list[list[int]]:
    """Each segment's own tokens (no special tokens), tokenized as `layout` tokenizes it."""
    if layout == "official" and token_task:
        from papa.method.layout import prefix_space_tokenizer, uses_prefix_space

        if uses_prefix_space(model_type):
            tokenizer = prefix_space_tokenizer(tokenizer)
    out = []
    for segment in segments:
        words = not isinstance(segment, str)
        out.append(tokenizer(list(segment) if words else segment, add_special_tokens=False,
                             is_split_into_words=words, verbose=False)["input_ids"])
    return out


def truncation_counts(tokenizer, tasks: Sequence[str], *, model_type: str, data_dir: str | None = None,
                      splits: Sequence[str] = SPLITS, layouts: Sequence[str] = COMPARED,
                      limit: int | None = None, batch_size: int = 4096) -> pd.DataFrame:
    """Per task and split (at Table 3's length, first `limit` examples), how many inputs lose tokens in each layout
    (``<layout> cut``, ``<layout> cut %``)."""
    from papa.tasks.data import load_examples, resolve_data_dir
    from papa.tasks.registry import get_task

    for layout in layouts:
        check_one_of(layout, LAYOUTS, "layout")
    root = resolve_data_dir(data_dir)
    rows = []
    for task in tasks:
        spec = get_task(task)
        n = spec.hparams.max_length
        for split in splits:
            examples = load_examples(spec, split, root, limit=limit)
            if spec.kind == "token":
                texts, pairs = [list(e.words) for e in examples], None
            else:
                texts = [e.text for e in examples]
                pairs = [e.text_pair for e in examples] if spec.kind == "pair" else None
            row = {"task": task, "split": split, "max_length": n, "examples": len(texts)}
            for layout in layouts:
                cut = 0
                for start in range(0, len(texts), batch_size):
                    batch = encode(tokenizer, texts[start:start + batch_size],
                                   None if pairs is None else pairs[start:start + batch_size], max_length=n,
                                   layout=layout, model_type=model_type, token_task=spec.token_level)
                    cut += sum(batch.truncated)
                row[f"{layout} cut"] = cut
                row[f"{layout} cut %"] = round(100 * cut / len(texts), 2)
            rows.append(row)
    return pd.DataFrame(rows)
