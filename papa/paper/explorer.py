"""An ipywidgets explorer of constant matrices: pick constants (model), layer and head; type a sentence.

It shows, side by side, the head's constant matrix and its live attention on the sentence (both cropped to the
sentence's slots plus the final [SEP]), the head's pattern statistics (`papa.paper.patterns`), and how much the
sentence's representation moves when the first k heads of a replacement order use their constants.

Every callback is a plain method (`render`), so tests drive it without a browser; ``notebooks/explorer.ipynb``
shows it in JupyterLab or Voilà.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import ipywidgets as widgets
import torch

from papa.core.errors import InputError
from papa.method.architectures import model_signature
from papa.method.constants import ConstantMatrices, load_constants
from papa.method.controller import attach
from papa.method.layout import encode
from papa.method.models import load_model
from papa.method.selection import replacement_order
from papa.paper.figures import attention_vs_constant, png_bytes
from papa.paper.inspection import live_attention, mean_pooled
from papa.paper.patterns import head_patterns, special_slots

DEFAULT_TEXT = "the movie was not good , but the actors were wonderful ."


def constants_files(directory: str | os.PathLike) -> dict[str, Path]:
    """Average-constants files under `directory` (recursively), labelled ``model · corpus · length``."""
    found = {}
    for path in sorted(Path(directory).rglob("*.safetensors")):
        try:
            meta = load_constants(path).metadata
        except Exception:  # noqa: BLE001 - rankings and foreign files share the folder; list only constants
            continue
        if meta.kind == "average":
            found[f"{meta.model.model_name.split('/')[-1]} · {meta.corpus} · n={meta.max_length}"] = path
    return found


class HeadExplorer:
    """The explorer's state and widgets. ``HeadExplorer(files).widget`` is what a notebook displays.

    `files` maps labels to constants files (see `constants_files`); `loader` loads a model by name (default
    `papa.load_model`), so tests can pass tiny models.
    """

    def __init__(self, files: dict[str, str | os.PathLike], *, text: str = DEFAULT_TEXT,
                 loader: Callable[[str], tuple] = load_model, order_method: str = "first_to_last"):
        if not files:
            raise InputError("no average constants found: run `papa extract` (or a notebook) first, then point the "
                             "explorer at the folder holding the .safetensors files")
        self.files = {k: Path(v) for k, v in files.items()}
        self._loader = loader
        self._models: dict[str, tuple] = {}
        self.order_method = order_method
        first = next(iter(self.files))
        self.choice = widgets.Dropdown(options=list(self.files), value=first, description="constants")
        self.layer = widgets.Dropdown(options=[0], value=0, description="layer")
        self.head = widgets.Dropdown(options=[0], value=0, description="head")
        self.text = widgets.Text(value=text, description="sentence", continuous_update=False,
                                 layout=widgets.Layout(width="600px"))
        self.replaced = widgets.IntSlider(value=0, min=0, max=1, description="replaced", continuous_update=False)
        self.image = widgets.Image(format="png")
        self.stats = widgets.HTML()
        self._loading = True  # widget values change while constants load: render once, at the end
        self._load(first)
        self.choice.observe(lambda change: self._on_choice(change["new"]), names="value")
        for w in (self.layer, self.head, self.text, self.replaced):
            w.observe(lambda _change: None if self._loading else self.render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.choice, self.layer, self.head]), self.text, self.replaced,
                                    self.image, self.stats])
        self.render()

    # ---- state --------------------------------------------------------------------------------------------------
    def _load(self, label: str) -> None:
        self.constants: ConstantMatrices = load_constants(self.files[label])
        name = self.constants.metadata.model.model_name
        if name not in self._models:
            self._models[name] = self._loader(name)
        self.model, self.tokenizer = self._models[name]
        self.constants.check_compatible(self._signature())
        L, H = self.constants.num_layers, self.constants.num_heads
        self.special = special_slots(self.tokenizer, self.constants.max_length, pair=self.constants.metadata.pairs,
                                     model_type=self.model.config.model_type)
        self.patterns = head_patterns(self.constants, self.special)
        self.order = replacement_order(self.order_method, L, H, seed=0)
        with self.layer.hold_trait_notifications(), self.head.hold_trait_notifications():
            self.layer.options, self.layer.value = list(range(L)), min(self.layer.value, L - 1)
            self.head.options, self.head.value = list(range(H)), min(self.head.value, H - 1)
        self.replaced.max, self.replaced.value = L * H, min(self.replaced.value, L * H)

    def _signature(self):
        return model_signature(self.model, self.constants.metadata.model.model_name)

    def _on_choice(self, label: str) -> None:
        self._loading = True
        self._load(label)
        self.render()

    # ---- the one callback ---------------------------------------------------------------------------------------
    def render(self) -> dict:
        """Recompute everything for the current widget values; returns what is shown (for tests)."""
        self._loading = False
        layer, head, text = int(self.layer.value), int(self.head.value), self.text.value.strip()
        if not text:
            self.stats.value = "<b>type a sentence</b>"
            return {}
        n = self.constants.max_length
        layout = self.constants.metadata.layout  # the sentence is laid out as the constants' corpus was
        live = live_attention(self.model, self.tokenizer, text, max_length=n, layout=layout)[layer, head]
        inputs = encode(self.tokenizer, [text], max_length=n, model_type=self.model.config.model_type,
                        layout=layout).inputs
        slots = inputs["attention_mask"][0].bool().nonzero().flatten().tolist()
        ids = inputs["input_ids"][0]
        tokens = self.tokenizer.convert_ids_to_tokens(ids[slots].tolist())
        constant = self.constants.matrices[layer, head][slots][:, slots]
        constant = constant / constant.sum(-1, keepdim=True).clamp_min(1e-12)  # as at use: masked, renormalised
        shown = live[slots][:, slots]
        similarity = self._similarity(text)
        self.image.value = png_bytes(attention_vs_constant(constant, shown, tokens,
                                                           title=f"layer {layer}, head {head}"))
        p = self.patterns
        row = p[(p["layer"] == layer) & (p["head"] == head)].iloc[0]
        self.stats.value = (
            f"special mass {row.special_mass:.2f} ({'special' if row.special else 'not special'}), "
            f"diagonal share {row.diagonal_share:.2f} ({'diagonal' if row.diagonal else 'not diagonal'}), "
            f"spread {row.spread:.2f}<br>"
            f"{self.replaced.value} of {self.replaced.max} heads replaced ({self.order_method} order): "
            f"cosine to the original sentence representation {similarity:.4f}")
        return {"constant": constant, "live": shown, "tokens": tokens, "similarity": similarity,
                "patterns": row.to_dict(), "png": self.image.value}

    def _similarity(self, text: str) -> float:
        n = self.constants.max_length
        inputs = encode(self.tokenizer, [text], max_length=n, model_type=self.model.config.model_type,
                        layout=self.constants.metadata.layout).inputs
        reference = mean_pooled(self.model, inputs)
        k = int(self.replaced.value)
        if k == 0:
            return 1.0
        ctrl = attach(self.model, self.constants)
        try:
            ctrl.replace(self.order[:k])
            return float(torch.nn.functional.cosine_similarity(mean_pooled(self.model, inputs), reference)[0])
        finally:
            ctrl.detach()
