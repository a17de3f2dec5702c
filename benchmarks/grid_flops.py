"""FLOPs of what `full_cost.py` times, and where a split's features go on a node of a given memory.

`row_flops` counts, for one part-B row (a size class on a task at Table 3's batch and length), the FLOPs of each
rate and step the row holds, with `papa.method.cost`: every slot of the padded length n counts (the models compute
padding), the probe reads the row's `read_per_example` positions. The row's model is RoBERTa-shaped: its layers and
hidden width, a feed-forward block 4 × as wide, the MLM probe decoding to RoBERTa's vocabulary.

`choose_path` is where a split's features live with the feature stores: the runner's own rule
(`papa.probing.feature_store.choose_path`) on an accelerator, with the batch order ``chunks`` where a split fits no
memory and the disk unbounded.
"""
from __future__ import annotations

from papa.core.vocabulary import BF16_SUFFIX
from papa.method.cost import encoder_shape, pass_flops, probe_flops, step_flops
from papa.probing.feature_store import BYTES_PER_VALUE
from papa.probing.feature_store import choose_path as store_choose_path
from papa.tasks.registry import get_task

#: len(tokenizer) of roberta-base and roberta-large: the MLM probe's output width in `full_cost.py`.
ROBERTA_VOCAB = 50265
#: Bytes of a bf16 value: a store that keeps features in bfloat16 holds half of float32's.
BF16_BYTES = 2
#: The paths a split of the grid can take on an accelerator (`papa.core.vocabulary.STORE_PATHS`' names, + ``_bf16``):
#: float32 on the device or in pinned host memory (copied to the device ahead of the step), the same in bfloat16
#: (``--precision bf16_with_store``), or streamed from disk in chunks (``--batch-order chunks``).
PATHS = ("device", "pinned_host", "device_bf16", "pinned_host_bf16", "disk_streamed", "disk_streamed_bf16")
#: A disk budget no split of the grid reaches: the prediction assumes the node's disk holds any split.
DISK_UNBOUNDED = 2**60


def row_flops(row: dict) -> dict[str, float]:
    """FLOPs of each of `row`'s measurements: per sequence for the passes (``forward``, ``capture``, ``fill`` (half
    the heads constant, Q/K dropped), ``fill_constant`` (every head), ``stored_eval`` (the probe alone)), per step of
    Table 3's batch for the steps (``stored_step``, ``rerun_step``, ``lambda_step``, ``trainable_step``,
    ``plain_step``), each step with its probe's."""
    spec = get_task(row["task"])
    n, batch = spec.hparams.max_length, spec.hparams.batch_size
    shape = encoder_shape(row["hidden"], 4 * row["hidden"], row["layers"])
    labels = ROBERTA_VOCAB if spec.vocabulary_targets else spec.num_labels
    probe = probe_flops(spec.kind, row["layers"] + 1, row["hidden"], row["read_per_example"], labels)
    probe_step = probe_flops(spec.kind, row["layers"] + 1, row["hidden"], row["read_per_example"], labels, step=True)
    forward, half = pass_flops(shape, n), pass_flops(shape, n, replaced_share=0.5)
    return {"forward": forward, "capture": forward, "fill": half,
            "fill_constant": pass_flops(shape, n, replaced_share=1.0), "stored_eval": probe,
            "stored_step": batch * probe_step, "rerun_step": batch * (half + probe_step),
            "lambda_step": batch * (step_flops(shape, n, mixed=True) + probe_step),
            "trainable_step": batch * (step_flops(shape, n, replaced_share=1.0) + probe_step),
            "plain_step": batch * (step_flops(shape, n) + probe_step)}


def feature_bytes(examples: int, row: dict, value_bytes: int = BYTES_PER_VALUE) -> float:
    """Bytes of a split of `examples` in a store: the read positions' hidden states of every layer."""
    return examples * row["read_per_example"] * (row["layers"] + 1) * row["hidden"] * value_bytes


def choose_path(nbytes: float, device_budget: float, host_budget: float, bf16: bool = True) -> tuple[str, int]:
    """(path, bytes per value) of a split whose features take `nbytes` in float32 (module docstring): the runner's
    rule, bfloat16 only where `bf16` allows it."""
    budgets = {"device": int(device_budget), "host": int(host_budget), "disk": DISK_UNBOUNDED}
    path = store_choose_path(int(nbytes), budgets, allow_bf16=bf16, batch_order="chunks")
    return path, BF16_BYTES if path.endswith(BF16_SUFFIX) else BYTES_PER_VALUE
