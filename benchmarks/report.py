"""The suite's rows: what one variant measured, its FLOPs and share of the device's peak, and the markdown table."""
from __future__ import annotations

from dataclasses import dataclass, field

@dataclass
class Row:
    """One measured variant of one model at one length: speed, ratio to its reference, memory, target and verdict."""

    model: str
    n: int
    what: str
    seq_s: float | None = None
    ratio: float | None = None
    ratio_of: str = ""
    peak_mib: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    batch: int | None = None              # sequences per batch, where the row's differs from the run's
    flops_per_seq: float | None = None    # `bench_flops` / `papa.method.cost`
    tflops: float | None = None           # seq/s × FLOPs per sequence
    peak_share: float | None = None       # of the device's dense peak in the run's precision (`peaks.py`)
    launch_bound: bool | None = None      # under `peaks.LAUNCH_BOUND_SHARE` of that peak


def arithmetic(row: Row, peak: float | None, count: bool = True) -> None:
    """Fill `row`'s FLOPs per sequence (where it has none: `bench_flops`, when `count`), TFLOP/s, share of `peak` and
    launch-bound mark."""
    from benchmarks.bench_flops import row_flops_per_seq
    from benchmarks.peaks import launch_bound, share_of_peak

    if row.flops_per_seq is None and count:
        row.flops_per_seq = row_flops_per_seq(row.model, row.what, row.n)
    if row.flops_per_seq and row.seq_s:
        row.tflops = row.seq_s * row.flops_per_seq / 1e12
        row.peak_share, row.launch_bound = share_of_peak(row.tflops, peak), launch_bound(row.tflops, peak)


@dataclass
class Report:
    """The run's rows, each completed by `arithmetic` and printed as it is added."""

    rows: list[Row] = field(default_factory=list)
    peak: float | None = None   # the device's dense peak in the run's precision (TFLOP/s); None on a CPU
    count: bool = True          # count FLOPs by model label (not for --tiny: the labels name the real sizes)

    def add(self, *args, **kwargs) -> Row:
        row = Row(*args, **kwargs)
        arithmetic(row, self.peak, self.count)
        self.rows.append(row)
        print(format_row(row), flush=True)
        return row


def fmt(x: float | None, spec: str) -> str:
    """`x` formatted by `spec`, or a dash where it was not measured."""
    return "–" if x is None else format(x, spec)


def format_row(r: Row) -> str:
    """`r` as a row of the markdown table under `HEADER`."""
    verdict = "" if r.met is None else ("met" if r.met else "**not met**")
    ratio = "" if r.ratio is None else f"{r.ratio:.2f}× {r.ratio_of}".strip()
    share = "" if r.peak_share is None else f"{r.peak_share:.1%}{', launch-bound' if r.launch_bound else ''}"
    return (f"| {r.model} | {r.n} | {r.what} | {fmt(r.seq_s, '.1f')} | {fmt(r.tflops, '.1f')} | {share} | {ratio} | "
            f"{fmt(r.peak_mib, '.0f')} | {r.target} | {verdict} | {r.note} |")


HEADER = ("| model | n | what | seq/s | TFLOP/s | % of peak | ratio | peak MiB | target | verdict | note |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
