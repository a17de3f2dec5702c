"""The speed table's decoder part (`bench.py --models smollm2`): capture and scoring text on a causal LM.

Parts 1 and 2 of `bench.py` on SmolLM2-135M, on WikiText windows of n tokens (consecutive paragraphs joined, no
padding, as a causal LM scores a document): capture vs the plain forward of the backbone and the naive method, and
scoring text (and hidden states) with every head constant and Q/K dropped vs the original, against the whole-model
MAC ceiling (`papa.method.cost`).
"""
from __future__ import annotations

import gc
from functools import partial

import torch

import papa

from benchmarks.cases import Case, ModelBench, naive_pass
from benchmarks.timing import peak_mib


def decoder_texts(tokenizer, paragraphs: list[str], n: int, count: int) -> list[str]:
    """`count` texts of at least `n` tokens, each consecutive paragraphs joined by newlines (as a causal LM scores a
    document: full windows, no padding). Raises when the paragraphs run out."""
    texts, start = [], 0
    while len(texts) < count:
        end = start
        while True:
            end += 1
            if end > len(paragraphs):
                raise ValueError(f"{len(paragraphs)} paragraphs give only {len(texts)} texts of {n} tokens")
            joined = "\n".join(paragraphs[start:end])
            if len(tokenizer(joined)["input_ids"]) >= n:
                break
        texts.append(joined)
        start = end
    return texts


LOGITS_CHUNK_BYTES = 16 << 20  # logits scored at once: a [B, n, vocab] tensor is 200 MB at B·n = 1024


def _score(m, b) -> float:
    """Score text: the negative log-likelihood of every real token after the first. The backbone's hidden states go
    through the LM head a chunk of positions at a time (`LOGITS_CHUNK_BYTES` of logits, as a scorer of long texts
    does); every position's logits are computed, as ``model(...).logits`` would."""
    from papa.method.architectures import backbone

    hidden = backbone(m)(**b, use_cache=False).last_hidden_state[:, :-1].flatten(0, 1)
    targets = b["input_ids"][:, 1:].flatten()
    real = b["attention_mask"][:, 1:].flatten()
    head = m.get_output_embeddings()
    rows = max(1, LOGITS_CHUNK_BYTES // (4 * head.out_features))
    total = 0.0
    for r in range(0, hidden.shape[0], rows):
        nll = torch.nn.functional.cross_entropy(head(hidden[r:r + rows]).float(), targets[r:r + rows],
                                                reduction="none")
        total += float((nll * real[r:r + rows]).sum())
    return total


def score_pass(model, batches: list[dict[str, torch.Tensor]], autocast) -> None:
    """Score every batch's text (`_score`) without gradient, under `autocast`."""
    with torch.no_grad(), autocast():
        for b in batches:
            _score(model, b)


class DecoderBench(ModelBench):
    """Part 1 (capture vs the plain forward and the naive method, on the backbone's hidden states) and part 2 (scoring
    text with every head constant, Q/K dropped, vs the original; also hidden states alone) on a causal LM."""

    layout = "standard"
    forward_kwargs = {"use_cache": False}

    def __init__(self, case: Case, paragraphs: list[str]):
        from papa.method.architectures import backbone

        super().__init__(case, decoder_texts(case.tokenizer, paragraphs, case.n, case.batch_size * case.n_batches))
        self.plain_bb, self.work_bb = backbone(self.plain), backbone(self.work)

    def capture(self) -> None:
        """Part 1 on hidden states (what extraction needs), and capture through the whole model (LM head included);
        the captured averages become the constants."""
        from papa.method.architectures import backbone

        c, ctrl = self.case, self.ctrl
        eager = self.naive_copy()
        sums = torch.zeros(ctrl.num_layers, ctrl.num_heads, c.n, c.n, dtype=torch.float64, device=c.device)
        naive = partial(naive_pass, backbone(eager), self.batches, c.autocast, sums, use_cache=False)
        with ctrl.capturing(c.n):  # the model's first timing call is discarded (see EncoderBench.capture)
            t = self.time({"plain": self.run(self.plain_bb), "capture": self.run(self.work_bb),
                           "capture_lm": self.run(self.work), "naive": naive}, warmup=c.repeats + 1)
            mem = {k: peak_mib(fn_one, c.device) for k, fn_one in (
                ("plain", self.run(self.plain_bb)), ("capture", self.run(self.work_bb)), ("naive", naive))}
        sums.zero_()
        naive()
        with ctrl.capturing(c.n) as stats:
            self.run(self.work_bb)()
        agree = float((stats.sums.to(c.device) - sums).abs().max() / sums.abs().max())
        accumulator_mib = stats.sums.numel() * stats.sums.element_size() / 2**20
        self.add("plain forward (sdpa), hidden states", self.seqs / t["plain"], peak_mib=mem["plain"])
        self.add("capture (papa), hidden states", self.seqs / t["capture"], t["plain"] / t["capture"], "of plain",
                 mem["capture"], "≥ 0.85× plain", t["plain"] / t["capture"] >= 0.85,
                 f"sums equal naive's to {agree:.0e} (relative); float64 accumulator {accumulator_mib:.0f} MiB, "
                 "allocated once per corpus")
        self.add("capture through the LM head (the whole model)", self.seqs / t["capture_lm"],
                 t["plain"] / t["capture_lm"], "of plain", note="what capture costs when the whole LM runs (the "
                 "vocabulary projection is thrown away); extract_constants runs the backbone, the row above")
        ok = t["naive"] / t["capture"] >= 2 and (mem["capture"] or 0) < (mem["naive"] or float("inf"))
        self.add("naive (eager, output_attentions)", self.seqs / t["naive"], t["naive"] / t["capture"],
                 "capture faster", mem["naive"], "capture ≥ 2× naive, less memory", ok)
        ctrl.set_constants(stats.to_constants(ctrl.signature, layout="standard"))
        del eager, naive, stats, sums
        gc.collect()

    def score(self) -> None:
        """Part 2: scoring text (LM head) and hidden states, every head constant with Q/K dropped, vs the original;
        detaches papa from the work copy."""
        from papa.method.attention_free import query_key_dropped_while

        c, ctrl = self.case, self.ctrl
        score, score_const = (partial(score_pass, m, self.batches, c.autocast) for m in (self.plain, self.work))
        ctrl.keep_all()
        ctrl.replace()
        with query_key_dropped_while(ctrl):
            t = self.time({"score": score, "score_const": score_const, "hidden": self.run(self.plain_bb),
                           "hidden_const": self.run(self.work_bb)})
            mem = {"score": peak_mib(score, c.device), "score_const": peak_mib(score_const, c.device)}
        ctrl.keep_all()
        papa.detach(self.work)
        del score_const
        self.work = None
        gc.collect()
        self._score_rows(t, mem)

    def _score_rows(self, t: dict[str, float], mem: dict[str, float | None]) -> None:
        """Part 2's rows, each against its whole-model MAC ceiling (with the LM head for scoring, without it for
        hidden states)."""
        from papa.method.cost import config_ceiling, head_speedup, model_cost, model_shape

        cfg, n, seqs = self.case.model.config, self.case.n, self.seqs
        tokens = sum(int(b["attention_mask"].sum()) for b in self.batches)
        shape = model_shape(cfg)
        head = head_speedup(n, shape.head_dim)
        grouped = shape.num_kv_heads < shape.num_heads
        for key, label, lm_head in (("score", "score text (LM head, log-probs)", True),
                                    ("hidden", "hidden states (no LM head)", False)):
            ceiling = config_ceiling(cfg, n, lm_head=lm_head)
            triangular = config_ceiling(cfg, n, lm_head=lm_head, triangular=True)
            # What papa's own path can reach (full n² products on both sides): K kept where keys are grouped.
            papa_path = model_cost(cfg, n, lm_head=lm_head).total / model_cost(
                cfg, n, replaced_share=1.0, kv_replaced_share=0.0 if grouped else 1.0, lm_head=lm_head).total
            self.add(f"{label}, original", seqs / t[key], peak_mib=mem.get(key),
                     note=f"{tokens / t[key]:.0f} tokens/s; {tokens} real tokens in {seqs * n} slots")
            speed = t[key] / t[f"{key}_const"]
            self.add(f"{label}, all heads constant, Q/K dropped", seqs / t[f"{key}_const"], speed, "of plain",
                     mem.get(f"{key}_const"), f"≥ 95% of ceiling {ceiling:.2f}×", speed >= 0.95 * ceiling,
                     f"{speed / ceiling:.0%} of ceiling; {tokens / t[f'{key}_const']:.0f} tokens/s; MAC ceiling "
                     f"{ceiling:.3f}× (full n² products; {triangular:.3f}× triangular; {papa_path:.3f}× with K kept, "
                     f"as papa's grouped-query path runs), §3.4 head-level {head:.2f}×")


def bench_decoder(case: Case, paragraphs: list[str]) -> None:
    """Parts 1 and 2 on a causal LM at one length (`DecoderBench`), on windows of consecutive `paragraphs`."""
    decoder = DecoderBench(case, paragraphs)
    decoder.capture()
    decoder.score()
