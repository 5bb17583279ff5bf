"""The single-batch latency figure: seconds from each `_SUCCESS` write to the commit tagged with
its rel, read from a table's snapshots as `verify.snapshots` returns them."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_dev.bench.latency import LatencyRun, nearest_rank, summary
from turnstile_dev.bench.workload import Workload


def test_nearest_rank_is_a_value_of_the_sample() -> None:
    values = [float(v) for v in range(1, 16)]  # 15 runs
    assert nearest_rank(values, 95) == 15.0
    assert nearest_rank(values, 50) == 8.0
    assert nearest_rank(list(reversed(values)), 20) == 3.0
    assert nearest_rank([2.5], 95) == 2.5


def _found(shape: Workload, committed_at: list[float]) -> dict[str, Any]:
    rows = shape.files * shape.rows
    return {
        "commits": [
            {"id": i, "committed_at_ms": int(at * 1000), "rel": shape.rel(i), "seqs": {str(i): rows}}
            for i, at in enumerate(committed_at)
        ],
        "duplicates": {},
    }


def test_latency_runs_from_the_success_write_to_its_tagged_commit() -> None:
    shape = Workload(tables=1, batches=4, files=2, rows=10)
    run = LatencyRun(shape)
    for batch, written in ((1, 100.0), (2, 110.0), (3, 120.0)):
        rel = shape.rel(batch)
        run.success_written_at[rel] = written
        run.success_write_seconds[rel] = 0.01
        run.idle_again_seconds[rel] = 3.0
    found = _found(shape, [90.0, 102.5, 111.0, 124.0])  # batch 0 created the table: not timed
    result = summary(run, found)
    assert result["seconds"] == [2.5, 1.0, 4.0]
    assert result["median_seconds"] == 2.5
    assert result["p95_seconds"] == 4.0
    assert (result["min_seconds"], result["max_seconds"]) == (1.0, 4.0)
    assert result["violations"]["total"] == 0
    assert result["violations"]["from_turnstile_rel"]["total"] == 0


def test_a_timed_batch_without_its_tagged_commit_is_an_error() -> None:
    shape = Workload(tables=1, batches=3, files=1, rows=5)
    run = LatencyRun(shape)
    for batch in (1, 2):
        run.success_written_at[shape.rel(batch)] = 10.0
    found = _found(shape, [5.0, 11.0])  # batch 2 never committed
    with pytest.raises(RuntimeError, match=f"no commit tagged {shape.rel(2)}"):
        summary(run, found)
