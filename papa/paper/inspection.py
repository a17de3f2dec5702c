"""Looking at single inputs: the layout of one example, one input's live attention, what replacing heads changes.

These serve the method notebook (01) and the widgets explorer; the experiments never call them.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from papa.core.errors import InputError
from papa.method.architectures import backbone
from papa.method.constants import ConstantMatrices
from papa.method.controller import attach, controller_of
from papa.method.extract import extract_constants
from papa.method.layout import encode, model_positions
from papa.method.selection import heads_to_replace
from papa.tasks.corpus import Corpus


def layout_table(tokenizer, text: str, pair: str | None = None, *, max_length: int, model_type: str,
                 edge: int = 8, layout: str = "sep_last") -> pd.DataFrame:
    """One row per slot of `text` (and `pair`) in `layout`; runs of padding are shown as one row. `position_id` is
    the position the model gives the slot (passed, or numbered by the model itself: `papa.method.layout.model_positions`)."""
    batch = encode(tokenizer, [text], None if pair is None else [pair], max_length=max_length, model_type=model_type,
                   layout=layout)
    ids = batch.inputs["input_ids"][0].tolist()
    mask = batch.inputs["attention_mask"][0].tolist()
    pos = model_positions(batch.inputs, model_type, tokenizer.pad_token_id)
    types = batch.inputs.get("token_type_ids")
    rows = [{"slot": slot, "token": tokenizer.convert_ids_to_tokens(token), "attention_mask": mask[slot],
             "position_id": None if pos is None else int(pos[0, slot]),
             "token_type_id": None if types is None else int(types[0, slot])} for slot, token in enumerate(ids)]
    # Collapse each run of pads longer than `edge` into one "… k pads …" row, so the table stays readable.
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


def readable_tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token of `ids` as a reader knows it: a byte-level BPE or SentencePiece piece decoded ("Ġmovie",
    "▁movie" -> "movie"), a WordPiece one and a special token as they are ("##ing", "[CLS]"); a token that decodes
    to whitespace alone keeps its piece, so that every slot shows something."""
    pieces = tokenizer.convert_ids_to_tokens(list(ids))
    return [tokenizer.decode([i]).strip() or piece for i, piece in zip(ids, pieces)]


def shown_head(num_layers: int, num_heads: int, layer: int = 2, head: int = 5) -> tuple[int, int]:
    """The head a notebook shows: (`layer`, `head`) where the model has them, else its last layer or head (a
    notebook run on a smaller model than its own)."""
    return min(layer, num_layers - 1), min(head, num_heads - 1)


def live_attention(model, tokenizer, text: str, pair: str | None = None, *, max_length: int,
                   layout: str = "sep_last") -> torch.Tensor:
    """Every head's attention on one input, [L, H, n, n] (0 at pad rows and columns), in `layout`.

    The heads' current modes apply (normally all 'keep'); the capture is the same one that builds constants.
    """
    one_input = Corpus("", [text], None if pair is None else [pair])
    return extract_constants(model, tokenizer, one_input, max_length=max_length, layout=layout, progress=False).matrices


def mean_pooled(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The last layer's hidden states averaged over real tokens, [B, d] (a causal LM's, without its LM head)."""
    with torch.no_grad():
        hidden = backbone(model)(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def replacement_effect(model, tokenizer, texts: Sequence[str], constants: ConstantMatrices,
                       order: Sequence[tuple[int, int]], fractions: Sequence[str]) -> pd.DataFrame:
    """How far the sentence representations move when all but `fraction` of the heads use their constants.

    Texts are laid out as the constants' corpus was. Heads are replaced in `order` (e.g. a λ ranking). Returns, per fraction, the number of input-dependent heads
    and the cosine similarity of each text's mean-pooled representation to the unmodified model's (1 = unchanged).
    """
    if not texts:
        raise InputError("replacement_effect needs at least one text")
    n = constants.max_length
    batch = encode(tokenizer, list(texts), max_length=n, model_type=model.config.model_type,
                   layout=constants.metadata.layout)
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    existing = controller_of(model)
    ctrl = existing or attach(model)
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
        if existing is None:
            ctrl.detach()
        else:
            ctrl.keep_all()
