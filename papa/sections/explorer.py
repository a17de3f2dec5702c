"""The module of the explorer notebook: an ipywidgets view of constant matrices, the model as a grid of heads and
one head in detail.

A picked head shows its constant beside its live attention on a typed sentence, its pattern statistics and its λ; a
slider replaces the first k heads and reports how far the sentence's representation moves. Every callback is a plain
method (`render`), so tests drive it without a browser.
"""
from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anywidget
import ipywidgets as widgets
import matplotlib
import numpy as np
import torch
import traitlets

from papa.core.artifacts import read_safetensors_metadata
from papa.core.errors import CorruptArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.method.architectures import model_signature
from papa.method.constants import ConstantMatrices, ConstantsMetadata, load_constants
from papa.method.controller import attach
from papa.method.layout import encode
from papa.method.models import load_model
from papa.method.rankings import RANKING_HEADER_KEY, HeadRanking, load_ranking
from papa.method.selection import replacement_order
from papa.paper.figures import attention_vs_constant, png_bytes
from papa.paper.inspection import live_attention, mean_pooled, readable_tokens
from papa.paper.patterns import head_patterns, special_slots
from papa.runs.session import GridConfig, task_constants
from papa.runs.stability import draw_of

DEFAULT_TEXT = "the movie was not good , but the actors were wonderful ."
# What the grid's thumbnails show: the constants cropped to the sentence's slots, or the whole n × n matrix.
GRID_SCOPES = ("sentence", "all slots")
# The largest thumbnail side sent to the browser; larger matrices are average-pooled to it.
THUMBNAIL_SIZE = 40
NO_RANKING = ""
# The head view at the widget's width (560 px at 80 dpi, shown unscaled), with token labels legible at that size.
HEAD_VIEW_SIZE = (7.0, 3.6)
HEAD_VIEW_FONT = 9.5
HEAD_VIEW_LABELS = 16


@dataclass(frozen=True)
class Artifacts:
    """What the explorer can show, by model name: average-constants files and λ rankings, each under a label."""

    constants: dict[str, dict[str, Path]]
    rankings: dict[str, dict[str, HeadRanking]] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        """The models that have average constants, in the order found."""
        return list(self.constants)


def find_artifacts(directory: str | os.PathLike) -> Artifacts:
    """Every average-constants file (read from its header only) and λ ranking under `directory`, grouped by model
    and labelled; other safetensors files are skipped."""
    root = Path(directory)
    constants: dict[str, dict[str, Path]] = {}
    rankings: dict[str, dict[str, HeadRanking]] = {}
    for path in sorted(root.rglob("*.safetensors")):
        if path.parent.name == RunFolder(root).predictions.name:  # thousands of files, none to show
            continue
        header = _header(path)
        folder = path.parent.relative_to(root).as_posix()
        where = "" if folder == "." else f" ({folder})"
        if "papa" in header:
            try:
                meta = ConstantsMetadata.from_json(header["papa"])
            except (ValueError, TypeError, KeyError):  # unreadable metadata: `load_constants` would say why
                continue
            if meta.kind == "average":
                label = f"{meta.corpus} · n={meta.max_length} · {meta.layout}{where}"
                constants.setdefault(meta.model.model_name, {})[label] = path
        elif RANKING_HEADER_KEY in header:
            try:
                ranking = load_ranking(path)
            except Exception:  # noqa: BLE001 - a corrupt ranking is not the explorer's to report; it is left out
                continue
            if ranking.lambdas is not None and ranking.model_name:
                m = ranking.metadata
                # profile and draw tell apart the rankings a task has (the grid's, other seeds, other data)
                draw = " ".join(str(x) for x in (m.get("profile"), draw_of(path.name)) if x)
                label = (f"{m.get('task', path.stem)} · {draw} · n={m.get('max_length', '?')} · "
                         f"{m.get('layout', '?')}{where}")
                rankings.setdefault(ranking.model_name, {})[label] = ranking
    return Artifacts(constants, rankings)


def best_constants(labelled: dict[str, Path], task: str | None = None) -> str:
    """The label to open a model's constants on: `task`'s own corpus, then the most sentences, then the first found."""
    def score(item: tuple[int, str]) -> tuple[bool, int, int]:
        meta = ConstantsMetadata.from_json(_header(labelled[item[1]])["papa"])
        own = task is not None and str(meta.corpus).split(":")[0].split("-")[0] == task
        return own, int(meta.num_examples or 0), -item[0]

    return max(enumerate(labelled), key=score)[1]


def _header(path: Path) -> dict[str, str]:
    try:
        return read_safetensors_metadata(path)
    except CorruptArtifactError:  # not a safetensors file: nothing to list
        return {}


def crop(matrices: torch.Tensor, slots: Sequence[int]) -> torch.Tensor:
    """The rows and columns `slots` of [..., n, n] matrices."""
    index = torch.as_tensor(list(slots), dtype=torch.long)
    # One advanced index over both axes: index_select on a leading axis of [L, H, n, n] is ~20x slower on the CPU.
    return matrices[..., index[:, None], index[None, :]]


def head_thumbnails(matrices: torch.Tensor, slots: Sequence[int] | None = None, *, size: int = THUMBNAIL_SIZE,
                    cmap: str = "viridis") -> torch.Tensor:
    """Every head's matrix as an RGBA image [L, H, t, t, 4] uint8, cropped to `slots`, rows renormalised,
    average-pooled to at most `size` and scaled to its own maximum."""
    m = matrices.detach().to("cpu", torch.float32)
    if slots is not None:
        m = crop(m, slots)
    m = m / m.sum(-1, keepdim=True).clamp_min(1e-12)
    layers, heads, n, _ = m.shape
    if n > size:
        m = torch.nn.functional.adaptive_avg_pool2d(m.reshape(layers * heads, 1, n, n), size)
        m = m.reshape(layers, heads, size, size)
    m = m / m.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-12)
    return torch.from_numpy(matplotlib.colormaps[cmap](m.numpy(), bytes=True))


def lambda_digits(lambdas, most: int = 5) -> int:
    """Decimals that tell `lambdas` apart in a caption: 3, up to `most` where they barely moved."""
    values = sorted({float(v) for v in torch.as_tensor(lambdas).flatten().tolist()})
    gaps = [b - a for a, b in zip(values, values[1:]) if b > a]
    if not gaps:
        return 3
    typical = sorted(gaps)[len(gaps) // 2]  # the median gap between neighbours
    return max(3, min(most, math.ceil(-math.log10(typical))))


class HeadGrid(anywidget.AnyWidget):
    """Every layer × head as a clickable thumbnail (``head_grid.js``); `selected` is the picked [layer, head]."""

    _esm = Path(__file__).with_name("head_grid.js")
    _css = Path(__file__).with_name("head_grid.css")
    layers = traitlets.Int(0).tag(sync=True)
    heads = traitlets.Int(0).tag(sync=True)
    size = traitlets.Int(0).tag(sync=True)
    pixels = traitlets.Bytes(b"").tag(sync=True)
    captions = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected = traitlets.List(traitlets.Int(), default_value=[0, 0]).tag(sync=True)

    def show(self, thumbnails: torch.Tensor) -> None:
        """Draw `thumbnails` ([L, H, t, t, 4] uint8, from `head_thumbnails`)."""
        layers, heads, size = thumbnails.shape[:3]
        with self.hold_sync():
            self.layers, self.heads, self.size = int(layers), int(heads), int(size)
            self.pixels = thumbnails.contiguous().numpy().tobytes()


@dataclass
class _Sentence:
    """What one sentence gives under the current constants, computed once: its slots, tokens and live attention."""

    inputs: dict[str, torch.Tensor]
    slots: list[int]
    tokens: list[str]
    live: torch.Tensor                       # [L, H, s, s]: every head's attention over the sentence's slots
    reference: torch.Tensor | None = None    # the unmodified representation, once a replacement asks for it
    similarity: dict[tuple, float] = field(default_factory=dict)


class HeadExplorer:
    """The explorer's state and widgets (``.widget``), over a folder or `Artifacts`; `loader` loads a model by name,
    `order_method` orders the slider's replacements without a λ ranking."""

    def __init__(self, artifacts: Artifacts | str | os.PathLike, *, text: str = DEFAULT_TEXT,
                 loader: Callable[[str], tuple] = load_model, order_method: str = "first_to_last",
                 model: str | None = None, task: str | None = None):
        if not isinstance(artifacts, Artifacts):
            artifacts = find_artifacts(artifacts)
        if not artifacts.constants:
            raise InputError("no average constants found: run `papa extract` (or a notebook) first, then point the "
                             "explorer at the folder holding the .safetensors files")
        self.artifacts = artifacts
        self._loader = loader
        self._models: dict[str, tuple] = {}
        self.order_method = order_method
        self.task = task
        first = model if model in artifacts.constants else artifacts.models[0]
        self.model_choice = widgets.Dropdown(options=[(name.split("/")[-1], name) for name in artifacts.models],
                                             value=first, description="model")
        opening = best_constants(artifacts.constants[first], task)
        self.choice = widgets.Dropdown(options=list(artifacts.constants[first]), value=opening, description="constants",
                                       layout=widgets.Layout(width="420px"))
        self.ranking_choice = widgets.Dropdown(options=[("none", NO_RANKING)], value=NO_RANKING,
                                               description="λ ranking", layout=widgets.Layout(width="380px"))
        self.layer = widgets.Dropdown(options=[0], value=0, description="layer")
        self.head = widgets.Dropdown(options=[0], value=0, description="head")
        self.scope = widgets.ToggleButtons(options=GRID_SCOPES, value=GRID_SCOPES[0], description="grid",
                                           style={"button_width": "80px"})
        self.text = widgets.Text(value=text, description="sentence", continuous_update=False,
                                 layout=widgets.Layout(width="600px"))
        self.replaced = widgets.IntSlider(value=0, min=0, max=1, description="replaced", continuous_update=False)
        self.grid = HeadGrid()
        self.image = widgets.Image(format="png")
        self.stats = widgets.HTML()
        self._loading = True  # widget values change while constants load: render once, at the end
        self._switching = False
        self._load(opening)
        self.model_choice.observe(lambda change: self._on_model(change["new"]), names="value")
        self.choice.observe(lambda change: self._on_choice(change["new"]), names="value")
        self.ranking_choice.observe(lambda change: self._on_ranking(change["new"]), names="value")
        self.grid.observe(lambda change: self._on_pick(change["new"]), names="selected")
        for w in (self.layer, self.head, self.text, self.replaced, self.scope):
            w.observe(lambda _change: None if self._loading else self.render(), names="value")
        # the head view beside the grid (below it where the window is too narrow), so that a click shows its head
        # where the eye already is
        head_view = widgets.VBox([self.image, self.stats], layout=widgets.Layout(width="560px"))
        head_view.add_class("papa-head-view")  # sticky beside a grid taller than the window (head_grid.css)
        view = widgets.HBox([self.grid, head_view],
                            layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start", overflow="visible"))
        self.widget = widgets.VBox([widgets.HBox([self.model_choice, self.choice, self.ranking_choice]),
                                    widgets.HBox([self.layer, self.head, self.scope]), self.text, self.replaced,
                                    view])
        self.render()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The widgets, and a picture of them for a viewer that runs none."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["image/png"] = base64.b64encode(self.picture()).decode("ascii")
        bundle["text/plain"] = (f"head explorer: {self.model_choice.value}, constants {self.choice.value} (a picture "
                                "of it; run the notebook for the widgets)")
        return bundle

    def picture(self) -> bytes:
        """A PNG of what the explorer shows now: the grid of every head's thumbnail and the picked head's view."""
        import matplotlib.pyplot as plt

        thumbs = self.thumbnails.numpy()  # [L, H, t, t, 4]
        layers, heads, t = thumbs.shape[:3]
        captions = [c for c in self.grid.captions if c]
        gap = t // 2 if captions else 2  # room under each thumbnail for its rank and λ
        mosaic = np.full((layers * (t + gap), heads * (t + 2), 4), 255, dtype=np.uint8)
        for layer in range(layers):
            for head in range(heads):
                top, left_edge = layer * (t + gap), head * (t + 2)
                mosaic[top:top + t, left_edge:left_edge + t] = thumbs[layer, head]
        view = plt.imread(io.BytesIO(self.image.value), format="png")
        fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6.5), width_ratios=[heads / max(layers, 1) * 1.1, 1])
        left.imshow(mosaic)
        if captions:
            for i, caption in enumerate(self.grid.captions):
                layer, head = divmod(i, heads)
                left.text(head * (t + 2) + t / 2, layer * (t + gap) + t + 1, caption, fontsize=4.5,
                          ha="center", va="top")
        ranking = "" if self.ranking is None else f"; #rank and λ from {self.ranking_choice.value}"
        left.set_title(f"{self.model_choice.value.split('/')[-1]}: every head ({layers} layers x {heads} heads), "
                       f"{self.choice.value}{ranking}", fontsize=9)
        left.set_xticks([(h + 0.5) * (t + 2) for h in range(heads)], range(heads), fontsize=7)
        left.set_yticks([(x + 0.5) * (t + gap) for x in range(layers)], range(layers), fontsize=7)
        left.set_xlabel("head")
        left.set_ylabel("layer")
        right.imshow(view)
        right.axis("off")
        fig.tight_layout()
        return png_bytes(fig)

    # ---- state --------------------------------------------------------------------------------------------------
    def _load(self, label: str) -> None:
        self._loading = True
        self.label = label
        self.constants: ConstantMatrices = load_constants(self.artifacts.constants[self.model_choice.value][label])
        name = self.constants.metadata.model.model_name
        if name not in self._models:
            self._models[name] = self._loader(name)
        self.model, self.tokenizer = self._models[name]
        self.constants.check_compatible(model_signature(self.model, name))
        L, H = self.constants.num_layers, self.constants.num_heads
        meta = self.constants.metadata
        self.special = special_slots(self.tokenizer, meta.max_length, pair=meta.pairs,
                                     model_type=self.model.config.model_type, layout=meta.layout)
        self.patterns = head_patterns(self.constants, self.special)
        self._sentences: dict[str, _Sentence] = {}
        self._grid_key: tuple | None = None
        with self.layer.hold_trait_notifications(), self.head.hold_trait_notifications():
            self.layer.options, self.layer.value = list(range(L)), min(self.layer.value, L - 1)
            self.head.options, self.head.value = list(range(H)), min(self.head.value, H - 1)
        self.replaced.max, self.replaced.value = L * H, min(self.replaced.value, L * H)
        self._rankings = {label: r for label, r in self.artifacts.rankings.get(name, {}).items()
                          if (r.num_layers, r.num_heads) == (L, H)}
        options = [("none", NO_RANKING), *((label, label) for label in self._rankings)]
        self._switching = True
        try:
            self.ranking_choice.options = options
            self.ranking_choice.value = self._matching_ranking()
        finally:
            self._switching = False
        self._set_ranking(self.ranking_choice.value)

    def _matching_ranking(self) -> str:
        """The ranking closest to these constants' task, length and layout, then most examples and seed 0."""
        meta = self.constants.metadata

        def score(item: tuple[str, HeadRanking]) -> tuple[bool, bool, bool, int, bool]:
            m = item[1].metadata
            return (str(meta.corpus).startswith(str(m.get("task", "\0"))), m.get("max_length") == meta.max_length,
                    m.get("layout") == meta.layout, int(m.get("examples") or 0), m.get("seed", 0) == 0)

        return max(self._rankings.items(), key=score)[0] if self._rankings else NO_RANKING

    def _set_ranking(self, label: str) -> None:
        L, H = self.constants.num_layers, self.constants.num_heads
        self.ranking: HeadRanking | None = self._rankings.get(label)
        if self.ranking is not None:
            self.order = self.ranking.order
            lam = self.ranking.lambdas
            # the rank in the order tells heads apart where λ barely moved (λ of 0.50 and 0.51 everywhere)
            rank = {(int(layer), int(head)): i + 1 for i, (layer, head) in enumerate(self.order)}
            digits = lambda_digits(lam)
            self.grid.captions = [f"#{rank[layer, head]} λ {float(lam[layer, head]):.{digits}f}"
                                  for layer in range(L) for head in range(H)]
        else:
            self.order = replacement_order(self.order_method, L, H, seed=0)
            self.grid.captions = [""] * (L * H)

    def _on_model(self, name: str) -> None:
        opening = best_constants(self.artifacts.constants[name], self.task)
        self._switching = True
        try:
            self.choice.options = list(self.artifacts.constants[name])
            self.choice.value = opening
        finally:
            self._switching = False
        self._load(opening)
        self.render()

    def _on_choice(self, label: str) -> None:
        if self._switching or label is None:
            return
        self._load(label)
        self.render()

    def _on_ranking(self, label: str) -> None:
        if self._switching:
            return
        self._set_ranking(label)
        self.render()

    def _on_pick(self, selected: list[int]) -> None:
        layer, head = (int(v) for v in selected)
        if (layer, head) == (self.layer.value, self.head.value):
            return
        self._loading = True  # move both menus, then draw once
        self.layer.value, self.head.value = layer, head
        self.render()

    # ---- what a sentence gives, once ----------------------------------------------------------------------------
    def _sentence(self, text: str) -> _Sentence:
        if text not in self._sentences:
            n, layout = self.constants.max_length, self.constants.metadata.layout
            inputs = encode(self.tokenizer, [text], max_length=n, model_type=self.model.config.model_type,
                            layout=layout).inputs  # the sentence is laid out as the constants' corpus was
            slots = inputs["attention_mask"][0].bool().nonzero().flatten().tolist()
            tokens = readable_tokens(self.tokenizer, inputs["input_ids"][0][slots].tolist())
            live = crop(live_attention(self.model, self.tokenizer, text, max_length=n, layout=layout), slots)
            if len(self._sentences) >= 16:  # typed sentences come and go: keep the last few
                self._sentences.pop(next(iter(self._sentences)))
            self._sentences[text] = _Sentence(inputs=inputs, slots=slots, tokens=tokens, live=live)
        return self._sentences[text]

    def _similarity(self, sentence: _Sentence, k: int) -> float:
        if k == 0:
            return 1.0
        heads = tuple(tuple(h) for h in self.order[:k])
        if heads not in sentence.similarity:
            if sentence.reference is None:
                sentence.reference = mean_pooled(self.model, sentence.inputs)
            ctrl = attach(self.model, self.constants)
            try:
                ctrl.replace(list(heads))
                sentence.similarity[heads] = float(torch.nn.functional.cosine_similarity(
                    mean_pooled(self.model, sentence.inputs), sentence.reference)[0])
            finally:
                ctrl.detach()
        return sentence.similarity[heads]

    def draw_grid(self, text: str | None = None) -> torch.Tensor:
        """(Re)draw the grid's thumbnails for `text` (default: the typed one) where anything they show changed."""
        text = self.text.value.strip() if text is None else text
        sentence_scope = self.scope.value == GRID_SCOPES[0]
        key = (self.label, self.scope.value, text if sentence_scope else None)
        if key != self._grid_key:
            slots = self._sentence(text).slots if sentence_scope else None
            self.thumbnails = head_thumbnails(self.constants.matrices, slots)
            self.grid.show(self.thumbnails)
            self._grid_key = key
        return self.thumbnails

    # ---- the one callback ---------------------------------------------------------------------------------------
    def render(self) -> dict:
        """Recompute what the current widget values show; returns it (for tests)."""
        self._loading = False
        layer, head, text = int(self.layer.value), int(self.head.value), self.text.value.strip()
        self.grid.selected = [layer, head]
        if not text:
            self.stats.value = "<b>type a sentence</b>"
            return {}
        sentence = self._sentence(text)
        thumbnails = self.draw_grid(text)
        slots = sentence.slots
        constant = crop(self.constants.matrices[layer, head], slots)
        constant = constant / constant.sum(-1, keepdim=True).clamp_min(1e-12)  # as at use: masked, renormalised
        shown = sentence.live[layer, head]
        similarity = self._similarity(sentence, int(self.replaced.value))
        self.image.value = png_bytes(attention_vs_constant(
            constant, shown, sentence.tokens, title=f"layer {layer}, head {head}", max_labels=HEAD_VIEW_LABELS,
            figsize=HEAD_VIEW_SIZE, fontsize=HEAD_VIEW_FONT))
        p = self.patterns
        row = p[(p["layer"] == layer) & (p["head"] == head)].iloc[0]
        lam = None if self.ranking is None else float(self.ranking.lambdas[layer, head])
        if lam is None:
            ranking, order = "no λ ranking for this model", f"{self.order_method} order"
        else:
            position = [tuple(h) for h in self.order].index((layer, head)) + 1
            ranking = (f"λ {lam:.3f} ({self.ranking_choice.value}): replaced {position} of {len(self.order)} in its "
                       "order (smallest λ first)")
            order = "λ order"
        self.stats.value = (
            f"special mass {row.special_mass:.2f} ({'special' if row.special else 'not special'}), "
            f"diagonal share {row.diagonal_share:.2f} ({'diagonal' if row.diagonal else 'not diagonal'}), "
            f"spread {row.spread:.2f}<br>{ranking}<br>"
            f"{self.replaced.value} of {self.replaced.max} heads replaced ({order}): "
            f"cosine to the original sentence representation {similarity:.4f}")
        return {"constant": constant, "live": shown, "tokens": sentence.tokens, "similarity": similarity,
                "patterns": row.to_dict(), "png": self.image.value, "lambda": lam, "thumbnails": thumbnails}


def open_explorer(artifacts_dir: str | os.PathLike, *, task: str = "sst2", profile: str = "quick",
                  data_dir: str | None = None, **kwargs) -> HeadExplorer:
    """The explorer over `artifacts_dir`, opened on `task`'s constants; with none there, `profile`'s are extracted
    into ``<artifacts_dir>/<profile>`` first."""
    found = find_artifacts(artifacts_dir)
    if not found.constants:
        task_constants(GridConfig(task, profile=profile, folder=Path(artifacts_dir) / profile,
                                  data_dir=data_dir), progress=False)
        found = find_artifacts(artifacts_dir)
    return HeadExplorer(found, task=task, **kwargs)
