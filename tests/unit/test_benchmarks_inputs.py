"""The performance suite's inputs and timing calls (benchmarks.suite): every batch
holds the sequences asked for, seq/s divides by the sequences timed, and every ratio comes from one timing call."""
from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from benchmarks import cases, suite
from benchmarks.suite import Report
from conftest import tiny_model, tiny_tokenizer

TEXTS = ["the cat sat on the mat", "a dog ran", "john ran to london and paris", "it was not good", "the film was bad",
         "mary is small", "a big dog sat", "the plot was very good"]


def test_a_batch_short_of_sequences_fails():
    tok = tiny_tokenizer("bert")
    with pytest.raises(ValueError, match="need 16 texts, got 8"):
        suite.encoded_batches(tok, TEXTS, 16, 8, 2, "sep_last", "bert", torch.device("cpu"))
    batches = suite.encoded_batches(tok, TEXTS, 16, 4, 2, "sep_last", "bert", torch.device("cpu"))
    assert [b["input_ids"].shape for b in batches] == [torch.Size([4, 16])] * 2


def test_texts_cover_the_largest_batch_asked():
    # An earlier GPU table asked --batch 64 16 of 32 texts: 32 sequences timed as 64 at n = 128.
    sizes = suite.batch_sizes([128, 512], [64, 16], quick=False)
    assert sizes == {128: 64, 512: 16} and suite.texts_needed(sizes, 1) == 64
    assert suite.texts_needed(suite.batch_sizes([128, 512], [256, 64], quick=False), 2) == 512
    assert suite.batch_sizes([128, 512], None, quick=False) == {128: 8, 512: 2}
    with pytest.raises(ValueError, match="2 sizes for 1 lengths"):
        suite.batch_sizes([128], [64, 16], quick=False)


def test_warmup_rounds_are_not_timed(monkeypatch):
    now = [0.0]
    calls = {"a": 0}
    monkeypatch.setattr(suite, "clock", lambda: now[0])

    def slow_first_calls():
        calls["a"] += 1
        now[0] += 100.0 if calls["a"] <= 3 else 1.0

    t = suite.interleaved({"a": slow_first_calls}, repeats=2, device=torch.device("cpu"), warmup=3)
    assert calls["a"] == 5 and t["a"] == 1.0


@pytest.mark.slow
def test_rows_divide_by_the_sequences_timed_and_ratios_share_a_call(monkeypatch):
    """bench_model on a tiny BERT (compiled with the eager backend): the compiled plain forward's ratio is to the
    eager plain forward timed in the same call, and every compiled note reads that call's eager row."""
    torch._dynamo.reset()
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    seen = []
    original = cases.interleaved

    def spy(variants, repeats, device, warmup=1):
        t = original(variants, repeats, device, warmup)
        seen.append(t)
        return t

    monkeypatch.setattr(cases, "interleaved", spy)
    report = Report()
    cases.bench_model(cases.Case("tiny", model, tok, 16, 4, 2, 1, nullcontext, torch.device("cpu"), report), TEXTS,
                      compile_backend="eager")
    rows = {r.what: r for r in report.rows}
    first = seen[0]
    assert rows["plain forward (sdpa)"].seq_s == pytest.approx(8 / first["plain"])  # 2 batches of 4, not asked 8
    [compiled] = [t for t in seen if "eager" in t]
    eager = rows["plain forward (sdpa), eager, timed with the compiled (eager) rows"]
    plain = rows["plain forward (sdpa), compiled (eager)"]
    assert eager.seq_s == pytest.approx(8 / compiled["eager"])
    assert plain.ratio == pytest.approx(plain.seq_s / eager.seq_s)
    capture = rows["capture (papa), compiled (eager)"]
    assert capture.note == f"{capture.seq_s / eager.seq_s:.2f}× this call's eager plain forward"
    torch._dynamo.reset()
