"""The suite's inputs and models: long texts (WikiText, else seeded random words), batches of exactly the sequences
asked for, and models with seeded random weights (a config's, BERT-base's, or shrunk to `TINY` for a smoke run)."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from papa.method.layout import encode

def texts_for(count: int, data_dir: str | None) -> tuple[list[str], str]:
    """Long real texts (WikiText paragraphs) when the data directory has them, else seeded random words."""
    try:
        from papa.tasks.corpus import task_corpus

        texts = [t for t in task_corpus("mlm", "train", data_dir=data_dir).texts if len(t.split()) > 60]
        if len(texts) >= count:
            return texts[:count], "WikiText-103 validation paragraphs (> 60 words)"
    except Exception as exc:  # noqa: BLE001 -- any data problem: fall back to synthetic text
        print(f"(no WikiText: {exc}; using random words)", file=sys.stderr)
    g = torch.Generator().manual_seed(0)
    words = "the a of and to in is was film good bad very not it this that plot actor story city river".split()
    texts = [" ".join(words[i] for i in torch.randint(len(words), (400,), generator=g).tolist()) for _ in range(count)]
    return texts, "seeded random words"


def batch_sizes(lengths: list[int], batch: list[int] | None, quick: bool) -> dict[int, int]:
    """Sequences per batch at each length: `batch` in the order of `lengths`, else 8 at n = 128 and 2 at 512 (--quick
    4 and 1; 2 at any other length)."""
    if batch is not None and len(batch) != len(lengths):
        raise ValueError(f"--batch gives {len(batch)} sizes for {len(lengths)} lengths {lengths}")
    default = {128: 4 if quick else 8, 512: 1 if quick else 2}
    return dict(zip(lengths, batch)) if batch else {n: default.get(n, 2) for n in lengths}


def texts_needed(sizes: dict[int, int], n_batches: int) -> int:
    """Texts the encoders' batches take: every length draws its batches from the same texts."""
    return n_batches * max(sizes.values())


def encoded_batches(tokenizer, texts: list[str], n: int, batch_size: int, n_batches: int, layout: str,
                    model_type: str, device: torch.device) -> list[dict[str, torch.Tensor]]:
    """`n_batches` batches of exactly `batch_size` texts each, encoded at length `n`. Raises when the texts run out:
    a short batch would be timed as if it held `batch_size` sequences (an earlier GPU table reported seq/s at
    n = 128 twice too high that way)."""
    if len(texts) < batch_size * n_batches:
        raise ValueError(f"{n_batches} batches of {batch_size} sequences need {batch_size * n_batches} texts, "
                         f"got {len(texts)}")
    batches = []
    for i in range(n_batches):
        chunk = texts[i * batch_size:(i + 1) * batch_size]
        inputs = encode(tokenizer, chunk, max_length=n, layout=layout, model_type=model_type).inputs
        if inputs["input_ids"].shape[0] != batch_size:
            raise ValueError(f"batch {i} holds {inputs['input_ids'].shape[0]} sequences, not {batch_size}")
        batches.append({k: v.to(device) for k, v in inputs.items()})
    return batches


#: A smoke run's model size (`random_model_dir(tiny=True)`): the code paths of the real size, in milliseconds.
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}


def random_model_dir(config_dir: Path, out: Path, seed: int = 0, tiny: bool = False) -> Path:
    """Save a model built from `config_dir`'s config with seeded random weights, beside its tokenizer files (where a
    model's weights cannot travel: time does not depend on their values). `tiny` shrinks it to `TINY`."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(config_dir)
    if tiny:
        for key, value in TINY.items():
            setattr(config, key, value)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(out)
    return out


def bert_base(vocab_size: int, seed: int = 0, tiny: bool = False):
    """A random BERT-base-sized encoder (12 layers, 768 hidden, 12 heads, 3072 feed-forward; `tiny`: `TINY`)."""
    from transformers import AutoModel, BertConfig

    size = TINY if tiny else dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    config = BertConfig(vocab_size=vocab_size, max_position_embeddings=512, **size)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, attn_implementation="sdpa").eval()
    model.config._name_or_path = "random-bert-base"
    return model
