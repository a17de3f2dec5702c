"""Why a probe does (not) learn on a model's features: `papa.sections.decoders.probe_diagnosis` on real data.

For one model and task, on the cpu profile's draw of examples, with the original attention: the share of saturated
tanh units and of constant predictions, for the paper's probe freshly initialised and after training, without and
with standardised inputs (`papa.probing.standardize`), each probe's metric, and the raw inputs' top dimensions.
Prints Markdown tables.

    python artifacts/probe_diagnosis/probe_diagnosis.py --model smollm2 --task sst2 --train 500 --eval 300 --epochs 2
    python artifacts/probe_diagnosis/probe_diagnosis.py --model all-MiniLM-L6-v2 --task sst2 --train 500 --eval 300

docs/decoders.md quotes its tables.
"""
from __future__ import annotations

import argparse
import time

import papa
from papa.core.settings import Resources
from papa.sections.decoders import probe_diagnosis
from papa.tasks.registry import get_task


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--task", default="sst2")
    ap.add_argument("--train", type=int, default=500, help="training examples (the cpu profile's random draw)")
    ap.add_argument("--eval", type=int, default=300, help="evaluation examples (the cpu profile's random draw)")
    ap.add_argument("--epochs", type=int, default=None, help="probe epochs (default: Table 3's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None, help="default: $PAPA_DATA_DIR")
    args = ap.parse_args(argv)

    if not get_task(args.task).trains_probe:
        ap.error(f"--task must be a sentence, pair or token task (the probes this diagnoses), not {args.task}")
    start = time.perf_counter()
    model, tokenizer = papa.load_model(args.model)
    table, scale = probe_diagnosis(model, tokenizer, args.task, profile="cpu", resources=Resources(args.data_dir),
                                   train_limit=args.train, eval_limit=args.eval, epochs=args.epochs, seed=args.seed)
    print(f"# {args.model}, {args.task}: {table.attrs['train']} training / {table.attrs['eval']} evaluation "
          f"examples, {table.attrs['epochs']} epochs, seed {args.seed}, {time.perf_counter() - start:.0f} s\n")
    print(table.to_string(float_format=lambda x: f"{x:.4f}"))
    print("\nRaw inputs (mean-pooled at init), largest dimensions:")
    print(scale.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
