"""Why a probe does (not) learn on a model's features: `papa.probing.diagnostics` on real data, raw and standardised.

For one model and task, on a fixed random training subset (the cpu profile's draw), with the original attention:
the share of saturated tanh units and of constant predictions, the input scale's top dimensions, for the paper's
probe freshly initialised and after training, without and with standardised inputs (`papa.probing.standardize`),
and each probe's metric on the evaluation subset. Prints a Markdown table.

    python benchmarks/probe_diagnosis.py --model smollm2 --task sst2 --train 500 --eval 300 --epochs 2
    python benchmarks/probe_diagnosis.py --model all-MiniLM-L6-v2 --task sst2 --train 500 --eval 300 --epochs 2
"""
from __future__ import annotations

import argparse
import time

import torch

import papa
from papa.method.architectures import is_causal
from papa.method.layout import layout_for
from papa.probing.diagnostics import diagnose_probe, input_scale, mlp_inputs
from papa.probing.features import FeatureSource, encode_task
from papa.probing.standardize import input_statistics
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.runs.profiles import get_profile
from papa.tasks.data import load_examples, resolve_data_dir
from papa.tasks.registry import get_task


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--task", default="sst2")
    ap.add_argument("--train", type=int, default=500, help="training examples (random subset, seed 0)")
    ap.add_argument("--eval", type=int, default=300, help="evaluation examples (random subset, seed 0)")
    ap.add_argument("--epochs", type=int, default=None, help="probe epochs (default: Table 3's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None, help="default: $PAPA_DATA_DIR")
    args = ap.parse_args(argv)

    spec = get_task(args.task)
    if spec.kind not in ("sentence", "pair", "token"):
        ap.error(f"--task must be a sentence, pair or token task (the probes this diagnoses), not {spec.kind}")
    data_dir = resolve_data_dir(args.data_dir)
    sample = get_profile("cpu").sample
    model, tokenizer = papa.load_model(args.model)
    causal = is_causal(model)
    layout = layout_for(causal, None, get_profile("cpu").layout)
    n = spec.hparams.max_length

    def encoded(split: str, limit: int):
        examples = load_examples(spec, split, data_dir, limit=limit, sample=sample)
        return encode_task(tokenizer, spec, examples, max_length=n, model_type=model.config.model_type,
                           layout=layout, causal=causal)

    start = time.perf_counter()
    train = FeatureSource(model, encoded("train", args.train), trainable_backbone=False, progress=True)
    evaluation = FeatureSource(model, encoded("eval", args.eval), trainable_backbone=False, progress=True)
    settings = TrainSettings.from_task(spec, epochs=args.epochs)

    rows = []
    for standardised in (False, True):
        torch.manual_seed(args.seed)
        probe = make_probe(spec, model, n)
        if standardised:
            probe.set_input_statistics(input_statistics(probe, train))
        before = diagnose_probe(probe, train)
        losses = train_probe(probe, spec.kind, train, settings, seed=args.seed, progress=False)
        after = diagnose_probe(probe, train)
        value = evaluate_probe(probe, spec, evaluation)
        rows.append((standardised, before, after, value, losses))

    fresh = make_probe(spec, model, n)  # mean pooling at initialisation: the inputs as the model gives them
    scale = input_scale(mlp_inputs(fresh, train), fresh.num_layers, fresh.hidden_size)
    print(f"# {args.model}, {args.task}: {len(train.data)} training / {len(evaluation.data)} evaluation examples, "
          f"{settings.epochs} epochs at {settings.learning_rate}, seed {args.seed}, layout {layout}, "
          f"{time.perf_counter() - start:.0f} s\n")
    print("| inputs | saturated at init | pre-activation std at init | constant predictions at init | "
          "saturated after | constant predictions after | first → last loss | metric |")
    print("|---|---|---|---|---|---|---|---|")
    for standardised, before, after, value, losses in rows:
        print(f"| {'standardised' if standardised else 'raw (paper)'} | {before.saturated:.3f} | "
              f"{before.preactivation_std:.2f} | {before.constant_predictions:.3f} | {after.saturated:.3f} | "
              f"{after.constant_predictions:.3f} | {losses[0]:.3f} → {losses[-1]:.3f} | {spec.metric} {value:.4f} |")
    top = scale.head(5)
    print(f"\nRaw inputs (mean-pooled at init): the 5 largest of {len(scale)} dimensions carry "
          f"{top['share'].sum():.1%} of the sum of squares; std/rms over inputs "
          + ", ".join(f"layer {r.layer} dim {r.dim}: rms {r.rms:.1f}, std/rms {r.std / r.rms:.3f}"
                      for r in top.itertuples()))


if __name__ == "__main__":
    main()
