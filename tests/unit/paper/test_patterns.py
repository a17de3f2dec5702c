"""Pattern statistics of constant matrices (paper 5.1) on hand-made matrices whose answers are known."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from papa.core.errors import InputError
from papa.method.constants import ConstantMatrices, ConstantsMetadata
from papa.method.signature import ModelSignature
from papa.paper.patterns import head_patterns, head_patterns_of, pattern_summary, representative_heads

N = 8
SIG = ModelSignature(model_name="toy", model_type="bert", num_layers=1, num_heads=3, config_fingerprint="c",
                     weights_fingerprint="w")


def _constants(matrices: torch.Tensor, real: int = 5) -> ConstantMatrices:
    """Constants observed on inputs of `real` content slots, [CLS] in slot 0 and [SEP] in slot N-1."""
    valid = torch.zeros(N, dtype=torch.float64)
    valid[: real + 1] = 1
    valid[N - 1] = 1
    counts = torch.outer(valid, valid) * 10
    matrices = matrices * (counts > 0)
    meta = ConstantsMetadata(kind="average", model=SIG, max_length=N, layout="sep_last", num_examples=10)
    return ConstantMatrices(matrices=matrices.float(), metadata=meta, counts=counts)


def _heads() -> torch.Tensor:
    eye = torch.eye(N)
    special = torch.zeros(N, N)
    special[:, 0] = 0.5
    special[:, N - 1] = 0.5
    uniform = torch.full((N, N), 1.0 / N)
    return torch.stack([eye, special, uniform]).unsqueeze(0)  # 1 layer x 3 heads


def test_known_patterns():
    p = head_patterns(_constants(_heads()), special=[0, N - 1]).set_index("head")
    assert p.loc[0, "diagonal"] and not p.loc[0, "special"] and p.loc[0, "spread"] == pytest.approx(0.0, abs=1e-6)
    assert p.loc[1, "special"] and p.loc[1, "special_mass"] == pytest.approx(1.0)
    # The uniform head: every observed key alike, so the spread is maximal and the special mass is 2 / 7 keys.
    assert p.loc[2, "spread"] == pytest.approx(1.0) and p.loc[2, "special_mass"] == pytest.approx(2 / 7)
    summary = pattern_summary(p.reset_index())
    assert summary["heads"] == 3 and summary["special"] == pytest.approx(1 / 3)


def test_unobserved_keys_do_not_count():
    """Entries never observed (beyond the longest input) are outside every row: rows renormalise over the rest."""
    m = _heads()
    m[0, 2] = 0.0
    m[0, 2, :, 1] = 1.0  # all mass on slot 1, a real token
    p = head_patterns(_constants(m, real=2), special=[0, N - 1])
    assert p.loc[2, "special_mass"] == pytest.approx(0.0)
    assert p.loc[2, "diagonal_share"] == pytest.approx(1.0)  # rows 1 and 2: slot 1 is within one slot of both


def test_representative_heads_are_distinct():
    p = head_patterns(_constants(_heads()), special=[0, N - 1])
    heads = representative_heads(p, k=3)
    assert sorted(heads) == [(0, 0), (0, 1), (0, 2)]
    assert representative_heads(p, k=10) == heads  # never more than there are heads


def test_errors():
    c = _constants(_heads())
    with pytest.raises(InputError, match="outside the constants' length"):
        head_patterns(c, special=[N])
    free = ConstantMatrices(matrices=c.matrices, metadata=c.metadata)
    with pytest.raises(InputError, match="observation counts"):
        head_patterns(free, special=[0])


def _causal_constants(matrices: torch.Tensor) -> ConstantMatrices:
    """Decoder constants: causal counts over N real slots, no special token."""
    counts = torch.ones(N, N, dtype=torch.float64).tril() * 10
    sig = ModelSignature(model_name="toy", model_type="llama", num_layers=1, num_heads=matrices.shape[1],
                         config_fingerprint="c", weights_fingerprint="w")
    meta = ConstantsMetadata(kind="average", model=sig, max_length=N, layout="standard", num_examples=10)
    return ConstantMatrices(matrices=(matrices * (counts > 0)).float(), metadata=meta, counts=counts)


def test_decoder_sinks_and_previous_token_heads():
    sink = torch.zeros(N, N)
    sink[:, 0] = 0.8
    sink += 0.2 * torch.eye(N)
    previous = torch.diag(torch.ones(N - 1), -1)
    previous[0, 0] = 1.0
    eye = torch.eye(N)
    p = head_patterns(_causal_constants(torch.stack([sink, previous, eye]).unsqueeze(0)), special=[]).set_index("head")
    # row 0 sees only itself and is left out; rows 1..N-1 put 0.8 on slot 0 (row 1 also 0.2 on itself, its neighbour)
    assert p.loc[0, "sink"] and p.loc[0, "first_mass"] == pytest.approx(0.8)
    assert p.loc[1, "previous"] and p.loc[1, "previous_share"] == pytest.approx(1.0) and p.loc[1, "diagonal"]
    assert not p.loc[2, "previous"] and not p.loc[2, "sink"] and p.loc[2, "diagonal"]
    summary = pattern_summary(p.reset_index())
    assert summary["sink"] == pytest.approx(1 / 3) and summary["previous"] == pytest.approx(1 / 3)


def test_sets_of_constants_at_once_read_as_each_alone():
    """`head_patterns_of` classifies several sets at once (the bootstrap's draws), sets whose observed rows differ
    included, as `head_patterns` classifies each; `pattern_summary(by="set")` gives each set's summary."""
    long, short = _constants(_heads()), _constants(_heads().flip(-1), real=2)
    both = head_patterns_of(torch.stack([long.matrices, short.matrices]), torch.stack([long.counts, short.counts]),
                            special=[0, N - 1])
    summaries = pattern_summary(both, by="set")
    for i, constants in enumerate((long, short)):
        alone = head_patterns(constants, special=[0, N - 1])
        pd.testing.assert_frame_equal(both[both["set"] == i].drop(columns="set").reset_index(drop=True), alone)
        pd.testing.assert_series_equal(summaries.loc[i], pattern_summary(alone), check_names=False)


def test_summary_of_a_table_saved_before_sinks():
    p = head_patterns(_constants(_heads()), special=[0, N - 1]).drop(columns=["sink", "previous"])
    assert list(pattern_summary(p).index) == ["heads", "diagonal", "special", "both", "neither", "median_spread"]


def test_shares_stay_shares_when_the_weights_round_past_one():
    """Rows weighed by how often they were kept, in proportions whose float64 sum is 1 + 1 ulp: a head whose every
    row looks at itself has diagonal share 1, not 1.0000000000000002 (which a range check of [0, 1] refuses)."""
    kept = torch.tensor([7.0, 17, 5, 10, 5, 4, 20, 9, 18, 20, 5, 10], dtype=torch.float64)
    assert (kept / kept.sum()).sum() > 1  # the rounding the test is about
    n = len(kept)
    counts = torch.ones(1, n, n, dtype=torch.float64) + torch.diag(kept - 1)
    matrices = (torch.eye(n) * 0.9 + 0.1 / n)[None, None, None]  # [1, 1, 1, n, n]: each row's strongest key is itself
    table = head_patterns_of(matrices, counts, special=[])
    assert table["diagonal_share"].item() == 1.0 and table[["special_mass", "spread", "first_mass"]].le(1).all(None)


def test_by_layer_text_names_the_layers_where_a_majority_some_and_none_are_sinks():
    """Three layers of four heads: 3 sinks in layer 0 (a majority), 1 in layer 2 (some), none in layer 1."""
    from papa.paper.patterns import by_layer_text, layer_counts, layer_ranges

    sinks = {0: [True, True, True, False], 1: [False] * 4, 2: [True, False, False, False]}
    table = pd.DataFrame([(layer, head, flag) for layer, flags in sinks.items() for head, flag in enumerate(flags)],
                         columns=["layer", "head", "sink"])
    assert layer_counts(table, "sink")["marked"].tolist() == [3, 0, 1]
    assert by_layer_text(table, "sink", "Sinks") == ("Sinks, 33% of the 12 heads: 3 of 4 (a majority) in layer 0; "
                                                    "1 of 4 in layer 2; none in layer 1")
    uneven = table[~((table["layer"] == 2) & (table["head"] == 3))]  # layers of 4, 4 and 3 heads: shares, not counts
    assert by_layer_text(uneven, "sink", "Sinks").startswith("Sinks, 36% of the 11 heads: 75% (a majority) in layer 0;"
                                                              " 33% in layer 2; none")
    assert layer_ranges([16, 0, 1, 2, 3, 20, 21]) == "0–3, 16, 20, 21"


def _intervals(diagonal: tuple[float, float, float], special: tuple[float, float, float]) -> pd.DataFrame:
    shares = {"diagonal": diagonal, "special": special, "median_spread": (0.7, 0.69, 0.71)}
    return pd.DataFrame([(name, *values, 72) for name, values in shares.items()],
                        columns=["share", "value", "low", "high", "heads"]).set_index("share")


def test_the_shares_beside_the_papers_say_where_an_interval_excludes_its_value():
    from papa.sections.constant_patterns import paper_comparison

    apart = paper_comparison(_intervals((0.65, 0.62, 0.67), (0.25, 0.25, 0.25)))
    assert apart.startswith("Fig. 4's shares beside the paper's (72 heads, 95% bootstrap intervals")
    assert ("diagonal heads 65% [62%, 67%] against the paper's about 90%, an interval wholly below it (the run "
            "disagrees with the paper)") in apart
    assert ("heads mostly on special tokens 25% [25%, 25%] against the paper's about 40%, an interval wholly "
            "below") in apart
    near = paper_comparison(_intervals((0.88, 0.85, 0.92), (0.45, 0.41, 0.48)))
    assert "diagonal heads 88% [85%, 92%] against the paper's about 90%, an interval that holds it;" in near
    assert "45% [41%, 48%] against the paper's about 40%, an interval wholly above it (the run disagrees" in near
    assert "spread" not in near  # the paper gives no value for the spread
    assert "no pattern intervals" in paper_comparison(_intervals((0.6, 0.5, 0.7), (0.2, 0.1, 0.3)).drop(
        ["diagonal", "special"]))
