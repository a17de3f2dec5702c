"""The one vocabulary of papa: every closed set of names that more than one module (or the CLI) uses.

Modules validate against these tuples and the CLI takes its ``choices=`` from them; nothing here imports torch.
"""
from __future__ import annotations

# ---- data --------------------------------------------------------------------------------------------------------

# How a limit picks its examples (papa.tasks.data.load_examples): the file's first ones, or a fixed random subset.
SAMPLES = ("first", "random")
# The splits a task's examples come from (papa.tasks.data, `papa extract --split`).
SPLITS = ("train", "eval")

# ---- constants (paper 3.1, 5.2, Table 1) -------------------------------------------------------------------------

# Constants built without data (paper 5.2).
DATA_FREE_KINDS = ("identity", "toeplitz", "zeros")
# Kinds a constants file may hold (besides "trained:<kind>", written after training).
KINDS = ("average", *DATA_FREE_KINDS)
# Kinds a probing grid can run: the file kinds, and Table 1's constants trained with the probe ("labeled data").
TRAINABLE_KINDS = ("trainable_toeplitz", "trainable_average")
CONSTANTS_KINDS = (*KINDS, *TRAINABLE_KINDS)
# What a results row records for a point that replaced nothing (fraction 1: no constants, no corpus, no selection).
NONE = "none"

# ---- head selection (paper 3.2, 5.4) -----------------------------------------------------------------------------

SELECTION_METHODS = ("lambda", "first_to_last", "last_to_first", "random", "reversed_lambda")
# The methods that read a learned λ ranking (the others need no preparation).
RANKED = ("lambda", "reversed_lambda")
# "<method>@<variant>" names another draw of a selection's order: "seed<k>", "part<k>" or "<profile>" for a ranking,
# "<k>" for random's permutation (papa.method.selection.parse_selection).
SELECTION_VARIANT_SEPARATOR = "@"
# What to do when a fraction is not a whole number of heads (papa.method.selection.num_input_dependent).
ROUNDINGS = ("exact", "down", "nearest")
# The paper's x-axis (4.2): shares of heads that stay input-dependent, as labels, from all heads to none.
PAPER_FRACTIONS = ("1", "1/2", "1/8", "1/16", "0")

# ---- the controller's head modes ---------------------------------------------------------------------------------

# keep: the head's own attention; replace: its constant matrix; mix: λ-weighted (paper 3.2). The controller's integer
# codes are these names' positions.
HEAD_MODES = ("keep", "replace", "mix")

# ---- input layouts (papa.method.layout) --------------------------------------------------------------------------

# The input layouts; constants, rankings and result rows record which one they were made in.
LAYOUTS = ("official", "sep_last", "standard")
# What reproductions (profiles, notebooks, `papa reproduce`, the CLI) use: the authors' released preprocessing.
REPRODUCTION_LAYOUT = "official"
# The one layout of causal LMs (left-aligned, right-padded; papa.method.layout "Decoders"): no separator to move.
DECODER_LAYOUT = "standard"

# ---- the probe's inputs (papa.probing.standardize) -------------------------------------------------------------

# raw: the hidden states as they are (the paper's probe); standardized: each (layer, dimension) shifted and scaled by
# its training mean and standard deviation first (same function class, better conditioned: decoders need it).
PROBE_INPUTS = ("raw", "standardized")
# What an encoder's probe reads unless told otherwise: the paper's probe reads the hidden states as they are.
PAPER_PROBE_INPUTS = "raw"
# What a causal LM's probe reads unless told otherwise: a few massive dimensions saturate the paper's probe.
DECODER_PROBE_INPUTS = "standardized"

# ---- numerical precision ---------------------------------------------------------------------------------------

# The dtypes a model can be loaded in (`--dtype`); the first is the default, whatever the checkpoint's.
MODEL_DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_DTYPE = MODEL_DTYPES[0]

# Where a frozen backbone's features are kept for a point's probes (tried in this order), or "backbone": not kept.
FEATURE_STORES = ("device", "host", "disk", "backbone")
# Where a split's features live while probes train (papa.probing.feature_store.choose_path); "disk_streamed" reads
# large sequential chunks. A path of bfloat16 features ends in BF16_SUFFIX.
STORE_PATHS = ("device", "pinned_host", "host", "disk", "disk_streamed")
BF16_SUFFIX = "_bf16"
# The order a point's probes see their training batches (`--batch-order`): each seed shuffles the whole split
# (the protocol's), or shuffles within blocks the backbone recomputes each epoch, or within stored chunks.
BATCH_ORDERS = ("per_seed", "blocks", "chunks")
DEFAULT_BATCH_ORDER = BATCH_ORDERS[0]
# How a grid point's run is computed (`--precision`): float32, TF32 matmuls, bf16 autocast of the backbone, float32
# backbone with features stored in bfloat16, or both of the last two.
PRECISIONS = ("float32", "tf32", "bf16", "bf16_store", "bf16_with_store")
#: The precisions whose backbone runs under bf16 autocast, and those whose frozen points store bfloat16 features.
AUTOCAST_PRECISIONS = ("bf16", "bf16_with_store")
BF16_STORE_PRECISIONS = ("bf16_store", "bf16_with_store")
DEFAULT_PRECISION = PRECISIONS[0]
# Whether a grid's backbone runs eagerly (the default) or compiled (`--compile`: one graph per head configuration).
EXECUTIONS = ("eager", "compiled")
DEFAULT_EXECUTION = EXECUTIONS[0]
# How each optimizer step of a probe runs (`--steps`): eagerly, replayed from a CUDA graph per batch shape, or
# compiled (torch.compile, "reduce-overhead").
STEP_MODES = ("eager", "graphed", "compiled")
DEFAULT_STEP_MODE = STEP_MODES[0]

# ---- the paper's tasks and models --------------------------------------------------------------------------------

# The paper's downstream tasks (4.1), whose metrics lie in [0, 1]; MLM (5.5) is shown on its own.
PAPER_TASKS = ("cola", "sst2", "mrpc", "mnli", "ner", "pos")
# The paper's models (4.1): base and large BERT, RoBERTa and DeBERTa, and ELECTRA for 5.5.
PAPER_BASE = ("bert-base-uncased", "roberta-base", "microsoft/deberta-base")
PAPER_LARGE = ("bert-large-uncased", "roberta-large", "microsoft/deberta-large")
ELECTRA_BASE = "google/electra-base-discriminator"

# ---- the reproduction --------------------------------------------------------------------------------------------

# The paper's section notebooks in run order (notebooks/<name>.ipynb), then those beyond the paper (08: causal LMs).
PAPER_NOTEBOOKS = ("01_method", "02_main_results", "03_constant_patterns", "04_alternative_matrices",
                   "05_data_dependence", "06_head_selection", "07_mlm_electra")
NOTEBOOKS = (*PAPER_NOTEBOOKS, "08_decoders")
# The built-in run profiles (papa.runs.profiles); a JSON file may define more.
PROFILE_NAMES = ("quick", "cpu", "full")
# Where a reproduction's compute time goes (papa.core.phases).
RUN_PHASES = ("extraction", "lambda", "features", "probe training", "trained constants", "evaluation")
# `papa jobs` actions and `--submitit` executors.
JOB_ACTIONS = ("list", "run")
SUBMITIT_CLUSTERS = ("slurm", "local")
