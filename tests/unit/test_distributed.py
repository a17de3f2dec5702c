"""papa.distributed without a launcher (identity) and its split of batches among processes."""
from __future__ import annotations

import pytest
import torch

from papa import distributed


def test_one_process_is_the_identity(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    t = torch.arange(6.0).reshape(3, 2)
    assert not distributed.launched() and distributed.world_size() == 1 and distributed.is_main()
    assert distributed.batch_block(7) == range(7)
    assert distributed.sum_across(t) is t and distributed.gather_blocks(t) is t
    assert distributed.main_decides([1, 2]) == [1, 2]
    assert distributed.process_device("cpu") == "cpu"


@pytest.mark.parametrize("batches", [0, 1, 2, 3, 9, 10, 64])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_blocks_cover_every_batch_once_in_order(monkeypatch, batches, world):
    blocks = []
    for r in range(world):
        monkeypatch.setattr(distributed, "world_size", lambda: world)
        monkeypatch.setattr(distributed, "rank", lambda r=r: r)
        blocks.append(distributed.batch_block(batches))
    assert [b for block in blocks for b in block] == list(range(batches))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1  # balanced
