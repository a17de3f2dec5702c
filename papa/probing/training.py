"""Training a probe on a frozen (PAPA-modified) backbone and evaluating it (paper 3.3, Appendix B).

Table 3's hyper-parameters, AdamW at a constant learning rate; a seed fixes the initial weights and the batch order.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from papa.core.progress import tqdm
from papa.probing.checkpoint import TrainingCheckpoint, stack_losses
from papa.probing.features import FeatureSource, fetched_steps, padded_features
from papa.probing.predictions import EvalPredictions
from papa.core.errors import InputError
from papa.core.vocabulary import DEFAULT_STEP_MODE
from papa.probing.probes import IGNORE_INDEX, LMHeadProbe, SentenceProbe, TokenProbe, mlm_probe
from papa.probing.step_modes import (DEFAULT_BACKEND, check_step_mode, fetcher, given_features, make_step,
                                     new_optimizer, step_logits)
from papa.tasks.metrics import compute_metric
from papa.tasks.registry import TaskSpec


@dataclass(frozen=True)
class TrainSettings:
    """How one probe is trained (Table 3's values: `from_task`); `extra_learning_rate` is that of the parameters
    trained beside it (None: `learning_rate`), `step_mode` and `step_backend` how each step runs."""

    learning_rate: float
    batch_size: int
    epochs: int
    extra_learning_rate: float | None = None
    step_mode: str = DEFAULT_STEP_MODE
    step_backend: str = DEFAULT_BACKEND

    @classmethod
    def from_task(cls, spec: TaskSpec, epochs: int | None = None,
                  step_mode: str = DEFAULT_STEP_MODE) -> "TrainSettings":
        h = spec.hparams
        return cls(h.learning_rate, h.batch_size, h.epochs if epochs is None else epochs, step_mode=step_mode)


def make_probe(spec: TaskSpec, model, max_length: int, vocab_size: int | None = None) -> nn.Module:
    """The probe for `spec`'s kind on `model`'s hidden states (L+1 layers of width d)."""
    layers, d = model.config.num_hidden_layers + 1, model.config.hidden_size
    if spec.kind in ("sentence", "pair"):
        return SentenceProbe(layers, d, max_length, spec.num_labels)
    if spec.kind == "token":
        return TokenProbe(layers, d, spec.num_labels)
    if spec.kind == "lm":
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if head is None:
            raise InputError(f"task {spec.name!r} scores a causal LM with its own LM head, and this model has none: "
                             "load it with papa.load_model (which loads decoders with their head)")
        return LMHeadProbe(head)
    if spec.vocabulary_targets:  # MLM and LM probe: a vocabulary-sized decoder trained from scratch on every layer
        return mlm_probe(layers, d, vocab_size or model.config.vocab_size)
    raise ValueError(f"task {spec.name!r} has unknown kind {spec.kind!r}")


def train_probe(probe: nn.Module, kind: str, source: FeatureSource, settings: TrainSettings, *, seed: int,
                extra_parameters: Iterable[nn.Parameter] = (), progress: bool = True, desc: str = "train probe",
                on_step: Callable[[int], None] | None = None,
                checkpoint: TrainingCheckpoint | None = None) -> list[float]:
    """Train `probe` (and `extra_parameters`, e.g. λ's θ) on `source`; returns the loss of every step (none when
    nothing trains). `on_step` gets the steps taken after each step; `checkpoint` makes the training resumable."""
    groups = [{"params": list(probe.parameters()), "lr": settings.learning_rate}]
    extra = [p for p in extra_parameters if p.requires_grad]
    if extra:
        groups.append({"params": extra, "lr": settings.extra_learning_rate or settings.learning_rate})
    return _train([_Member(probe, seed, groups)], kind, source, settings, progress=progress, desc=desc,
                  on_step=on_step, checkpoint=checkpoint)[0]


def train_probes(probes: Sequence[nn.Module], kind: str, source: FeatureSource, settings: TrainSettings, *,
                 seeds: Sequence[int], progress: bool = True, desc: str = "train probes") -> list[list[float]]:
    """Train one probe per seed together, each step every seed's on its own batch, so that each ends exactly as
    `train_probe` would leave it; returns each seed's step losses."""
    if len(probes) != len(seeds):
        raise ValueError(f"{len(probes)} probes for {len(seeds)} seeds: give one probe per seed")
    members = [_Member(probe, seed, [{"params": list(probe.parameters()), "lr": settings.learning_rate}])
               for probe, seed in zip(probes, seeds)]
    return _train(members, kind, source, settings, progress=progress, desc=desc)


#: Seeds the order of blocks (`train_probes_in_blocks`): shared by every seed, so that they share each block.
BLOCK_ORDER_SEED = 0


def train_probes_in_chunks(probes: Sequence[nn.Module], kind: str, source: FeatureSource, settings: TrainSettings, *,
                           seeds: Sequence[int], chunk_examples: int, progress: bool = True,
                           desc: str = "train probes") -> list[list[float]]:
    """Train one probe per seed on a stored split read in chunks of `chunk_examples` (batch order ``chunks``): the
    chunks in one order per epoch shared by every seed, each seed shuffling within a chunk."""
    source.check_chunks()
    return train_probes_in_blocks(probes, kind, source.model, source.data, settings, seeds=seeds,
                                  block_examples=chunk_examples, progress=progress, desc=desc,
                                  read=lambda epoch, size: source.chunks(size, BLOCK_ORDER_SEED + epoch))


def train_probes_in_blocks(probes: Sequence[nn.Module], kind: str, model, data, settings: TrainSettings, *,
                           seeds: Sequence[int], block_examples: int, progress: bool = True,
                           desc: str = "train probes",
                           read: Callable[[int, int], Iterable[tuple]] | None = None) -> list[list[float]]:
    """Train one probe per seed where the features fit no store (batch order ``blocks``): each epoch the split is
    shuffled once for every seed and cut into blocks of `block_examples`, the backbone runs once over a block and
    each seed shuffles within it. `read(epoch, block_examples)` gives the blocks instead, where given."""
    if len(probes) != len(seeds):
        raise ValueError(f"{len(probes)} probes for {len(seeds)} seeds: give one probe per seed")
    if block_examples < settings.batch_size:
        raise ValueError(f"blocks of {block_examples} examples hold less than one batch of {settings.batch_size}")
    block_examples -= block_examples % settings.batch_size  # whole batches: a seed's batches never straddle blocks
    mode = _checked_mode(settings, probes)
    members = []
    for probe, seed in zip(probes, seeds):
        optimizer = new_optimizer(mode, [{"params": list(probe.parameters()), "lr": settings.learning_rate}])
        step = make_step(mode, probe, optimizer, kind, given_features, backend=settings.step_backend,
                         batch_size=min(settings.batch_size, len(data)))
        members.append((probe, step, torch.Generator().manual_seed(seed), []))
    for probe, *_ in members:
        probe.train()
    n = len(data)
    label = "blocks" if read is None else "chunks"
    bar = tqdm(total=settings.epochs * -(-n // block_examples), desc=f"{desc} ({label})", unit="block",
               disable=not progress, leave=False)
    read = read or (lambda epoch, size: _backbone_blocks(model, data, size, BLOCK_ORDER_SEED + epoch))
    for epoch in range(settings.epochs):
        for feats, mask, labels in read(epoch, block_examples):
            for probe, step, generator, losses in members:
                order = torch.randperm(len(feats), generator=generator, device="cpu")
                for first in range(0, len(order), settings.batch_size):
                    rows = order[first:first + settings.batch_size].to(feats.device)
                    losses.append(step((feats[rows], mask[rows], labels[rows])))
            bar.update(1)
    bar.close()
    for probe, *_ in members:
        probe.eval()
    return [stack_losses(losses).tolist() for *_, losses in members]


def _checked_mode(settings: TrainSettings, probes: Sequence[nn.Module]) -> str:
    """The settings' step mode, refused (`check_step_mode`) where the probes' device cannot run it."""
    device = next((p.device for probe in probes for p in probe.parameters()), torch.device("cpu"))
    return check_step_mode(settings.step_mode, device)


def _backbone_blocks(model, data, size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One epoch's blocks of `size`, the split shuffled by `seed`, the backbone run over each as it is taken."""
    shared = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed), device="cpu")
    for start in range(0, len(data), size):
        block = shared[start:start + size]
        feats = padded_features(model, data, block)
        inputs, labels = data.batch(block)
        yield feats, inputs["attention_mask"].to(feats.device), labels.to(feats.device)


def _step_batches(source, fetch: Callable, orders: Sequence[torch.Tensor], start: int, batch_size: int
                  ) -> Iterator[Iterable]:
    """Each step's batches, one per order, as `fetch` gives them (a `FeatureSource` reads them together)."""
    if hasattr(source, "steps"):
        return source.steps(orders, start, batch_size)
    return fetched_steps(fetch, orders, start, batch_size, len(source.data))


@dataclass
class _Member:
    """One probe in training: its seed (its batch order) and its optimizer's parameter groups."""

    probe: nn.Module
    seed: int
    groups: list[dict]


def _train(members: list[_Member], kind: str, source: FeatureSource, settings: TrainSettings, *, progress: bool,
           desc: str, on_step: Callable[[int], None] | None = None,
           checkpoint: TrainingCheckpoint | None = None) -> list[list[float]]:
    """The training loop of `train_probe` and `train_probes`: AdamW per member, the members' steps interleaved."""
    mode = _checked_mode(settings, [m.probe for m in members])
    trained = []
    for m in members:
        groups = [g for g in m.groups if g["params"]]
        if not groups:
            m.probe.eval()
            continue
        trained.append((m, new_optimizer(mode, groups), torch.Generator().manual_seed(m.seed), []))
    if not trained:
        return [[] for _ in members]
    if checkpoint is not None and len(trained) != 1:
        raise ValueError("a checkpoint saves one probe's training: train the probes one at a time to checkpoint them")
    for m, *_ in trained:
        m.probe.train()
    total = settings.epochs * _steps_per_epoch(source, settings)
    resumed = None if checkpoint is None else checkpoint.restore(trained[0][1], trained[0][2])
    steps = 0 if resumed is None else resumed.steps
    if resumed is not None:
        trained[0][3].extend(resumed.losses)
    bar = tqdm(total=total * len(trained), initial=steps * len(trained), desc=desc, unit="step",
               disable=not progress, leave=False)
    fetch, features = fetcher(source)
    # made after the restore: a graph captures the optimizer's state tensors as they are from here on
    runners = [make_step(mode, m.probe, optimizer, kind, features, backend=settings.step_backend,
                         batch_size=min(settings.batch_size, len(source.data))) for m, optimizer, _, _ in trained]
    with nullcontext() if checkpoint is None else checkpoint.stopping_between_steps():
        _epochs(trained, runners, (fetch, source), settings, steps, resumed, bar, on_step, checkpoint)
    bar.close()
    read = {id(m): stack_losses(losses).tolist() for m, _, _, losses in trained}
    for m in members:
        m.probe.eval()
    return [read.get(id(m), []) for m in members]


def _epochs(trained: list, runners: list, reading: tuple, settings: TrainSettings, steps: int, resumed,
            bar, on_step: Callable[[int], None] | None, checkpoint: TrainingCheckpoint | None) -> None:
    """`_train`'s epochs from step `steps` on (a resumed run's: `resumed`); `reading` is (fetch, source)."""
    fetch, source = reading
    n, per_epoch = len(source.data), _steps_per_epoch(source, settings)
    total = settings.epochs * per_epoch
    for epoch in range(steps // per_epoch, settings.epochs):
        first = steps - epoch * per_epoch  # batches of this epoch already taken (0 unless it resumed within it)
        if first:  # the generator stands after this epoch's order: take the order it was drawn as
            orders = [resumed.order]
        else:  # the seed decides the order on any device
            orders = [torch.randperm(n, generator=generator, device="cpu") for _, _, generator, _ in trained]
        # every seed's batches of a step read together (from a store: in one gather, a step ahead)
        for batches in _step_batches(source, fetch, orders, first * settings.batch_size, settings.batch_size):
            for (_, _, _, losses), run, batch in zip(trained, runners, batches):
                losses.append(run(batch))
            steps += 1
            if on_step is not None:
                on_step(steps)
            if checkpoint is not None and checkpoint.due(steps, last=steps == total):
                _, optimizer, generator, losses = trained[0]
                checkpoint.save(steps, optimizer, generator, orders[0], losses)
                if checkpoint.stop_requested and steps < total:
                    raise KeyboardInterrupt  # saved: the same call resumes here
            bar.update(len(trained))
        if trained[0][3]:
            bar.set_postfix(loss=f"{trained[0][3][-1].item():.3f}", refresh=False)  # one read per epoch


def _steps_per_epoch(source: FeatureSource, settings: TrainSettings) -> int:
    return -(-len(source.data) // settings.batch_size)  # the last batch may hold fewer examples


@torch.no_grad()
def evaluate_probe(probe: nn.Module, spec: TaskSpec, source: FeatureSource, *, batch_size: int = 64,
                   return_predictions: bool = False) -> float | tuple[float, EvalPredictions]:
    """The task's metric on `source`; with `return_predictions`, (metric, `EvalPredictions`)."""
    probe.eval()
    if spec.predicts_next_token:  # every real position gets vocabulary-sized logits: batches of the task's own size
        batch_size = min(batch_size, spec.hparams.batch_size)
    preds, refs = [], []
    total_loss, total_tokens = 0.0, 0
    example_losses, example_tokens = [], []
    n = len(source.data)
    for start in range(0, n, batch_size):
        idx = torch.arange(start, min(start + batch_size, n), device="cpu")
        feats, mask, labels = source(idx)
        logits, targets = step_logits(probe, spec.kind, feats, mask, labels)
        if spec.vocabulary_targets:
            if return_predictions:
                batch_loss, loss, tokens = _example_losses(logits, targets, labels)
                total_loss += batch_loss
                example_losses.append(loss)
                example_tokens.append(tokens)
            else:
                total_loss += nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            total_tokens += targets.numel()
        elif spec.kind == "token":  # the selected positions, row by row: split them back into sentences
            per_row = (labels != IGNORE_INDEX).sum(dim=1).cpu().tolist()
            preds.extend(p.tolist() for p in logits.argmax(-1).cpu().split(per_row))
            refs.extend(t.tolist() for t in targets.cpu().split(per_row))
        else:
            preds.extend(logits.argmax(-1).cpu().tolist())
            refs.extend(targets.cpu().tolist())
    if spec.vocabulary_targets:
        value = compute_metric(spec.metric, total_loss / max(total_tokens, 1), None)
    else:
        value = compute_metric(spec.metric, preds, refs, label_names=spec.label_names)
    if not return_predictions:
        return value
    if spec.vocabulary_targets:
        predictions = EvalPredictions.from_losses(spec.kind, torch.cat(example_losses).numpy(),
                                                  torch.cat(example_tokens).numpy())
    elif spec.kind == "token":
        predictions = EvalPredictions.from_sequences(preds, refs, spec.label_names)
    else:
        predictions = EvalPredictions.from_labels(spec.kind, preds, refs, spec.label_names)
    return value, predictions


def _example_losses(logits: torch.Tensor, targets: torch.Tensor, labels: torch.Tensor
                    ) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The batch's summed cross-entropy, with each row's sum (float64, CPU) and number of scored tokens, from the
    selected positions' logits."""
    # nll_loss of log_softmax is cross_entropy bit for bit, with the vocabulary-sized softmax run once.
    log_probs = nn.functional.log_softmax(logits, dim=1)
    batch_loss = nn.functional.nll_loss(log_probs, targets, reduction="sum").item()
    token_loss = nn.functional.nll_loss(log_probs, targets, reduction="none").float().cpu().double()
    rows = (labels != IGNORE_INDEX).nonzero(as_tuple=True)[0].cpu()
    per_row = torch.zeros(labels.shape[0], dtype=torch.float64, device="cpu").index_add_(0, rows, token_loss)
    return batch_loss, per_row, torch.bincount(rows, minlength=labels.shape[0])
