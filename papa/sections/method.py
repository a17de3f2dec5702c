"""The module of the method section's notebook (01): the input layout, a head's live attention beside its constant,
and what replacing heads does to the sentence embedding."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from papa.core.errors import InputError
from papa.method.constants import ConstantMatrices
from papa.method.controller import attached
from papa.method.cost import config_speedups, forward_timings
from papa.method.layout import encode, model_positions
from papa.method.selection import heads_to_replace, replacement_order
from papa.paper.checks import check_table
from papa.paper.figures import attention_vs_constant
from papa.paper.inspection import live_attention, mean_pooled
from papa.paper.tables import save_table, setup
from papa.runs.profiles import get_profile
from papa.runs.session import GridConfig, task_constants
from papa.tasks.fidelity import cut_tokens, layout_comparison, truncation_counts


def layout_table(tokenizer, text: str, pair: str | None = None, *, max_length: int, model_type: str,
                 edge: int = 8, layout: str = "sep_last") -> pd.DataFrame:
    """One row per slot of `text` (and `pair`) in `layout`, with the position the model gives it; long runs of
    padding as one row."""
    batch = encode(tokenizer, [text], None if pair is None else [pair], max_length=max_length, model_type=model_type,
                   layout=layout)
    ids = batch.inputs["input_ids"][0].tolist()
    mask = batch.inputs["attention_mask"][0].tolist()
    pos = model_positions(batch.inputs, model_type, tokenizer.pad_token_id)
    types = batch.inputs.get("token_type_ids")
    rows = [{"slot": slot, "token": tokenizer.convert_ids_to_tokens(token), "attention_mask": mask[slot],
             "position_id": None if pos is None else int(pos[0, slot]),
             "token_type_id": None if types is None else int(types[0, slot])} for slot, token in enumerate(ids)]
    # one "… k pads …" row for each run of pads longer than `edge`, so the table stays readable
    out, run = [], []
    for row in rows + [None]:
        if row is not None and row["attention_mask"] == 0:
            run.append(row)
            continue
        if len(run) > edge:
            out += [run[0], {"slot": f"{run[1]['slot']}–{run[-2]['slot']}", "token": f"… {len(run) - 2} pads …",
                             "attention_mask": 0, "position_id": None, "token_type_id": None}, run[-1]]
        else:
            out += run
        run = []
        if row is not None:
            out.append(row)
    table = pd.DataFrame(out, columns=list(rows[0])).astype({"position_id": "Int64", "token_type_id": "Int64"})
    return table.set_index("slot")


def shown_head(num_layers: int, num_heads: int, layer: int = 2, head: int = 5) -> tuple[int, int]:
    """(`layer`, `head`), clipped to the model's last layer and head."""
    return min(layer, num_layers - 1), min(head, num_heads - 1)


def replacement_effect(model, tokenizer, texts: Sequence[str], constants: ConstantMatrices,
                       order: Sequence[tuple[int, int]], fractions: Sequence[str]) -> pd.DataFrame:
    """Per fraction, with heads replaced in `order`: the input-dependent heads and the mean and min cosine of the
    texts' mean-pooled representations to the unmodified model's (1 = unchanged)."""
    if not texts:
        raise InputError("replacement_effect needs at least one text")
    n = constants.max_length
    batch = encode(tokenizer, list(texts), max_length=n, model_type=model.config.model_type,
                   layout=constants.metadata.layout)
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    with attached(model) as ctrl:
        try:
            ctrl.set_constants(constants)
            ctrl.keep_all()
            reference = mean_pooled(model, inputs)
            rows = []
            total = ctrl.num_layers * ctrl.num_heads
            for fraction in fractions:
                replaced = heads_to_replace(order, fraction, ctrl.num_layers, ctrl.num_heads, "down")
                ctrl.keep_all()
                ctrl.replace(replaced)
                sim = torch.nn.functional.cosine_similarity(mean_pooled(model, inputs), reference, dim=-1)
                rows.append({"fraction": fraction, "input_dependent_heads": total - int(replaced.sum()),
                             "mean_cosine": float(sim.mean()), "min_cosine": float(sim.min())})
            return pd.DataFrame(rows)
        finally:
            ctrl.keep_all()  # a controller the caller attached keeps every head's own attention

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["GridConfig", "attention_vs_constant", "check_table", "config_speedups", "cut_tokens", "forward_timings",
           "get_profile", "heads_to_replace", "layout_comparison", "layout_table", "live_attention",
           "replacement_effect", "replacement_order", "save_table", "setup", "shown_head", "task_constants",
           "truncation_counts"]
