"""Single-batch latency on the warm local stack: from the upload of a batch's `_SUCCESS` to its
Iceberg commit.

One ordered table of its own (`_config/ORDERME`, the workload's schema, its gate file written so
nothing holds it), on the stack the other runs used, its warm driver already started. A first
batch creates the table and is not counted; then each batch in rel order, one after another, is
uploaded to an idle table: its data files, then `_SUCCESS`, the clock starting as the `_SUCCESS`
write starts. The next batch waits until the table is idle again (lock free, backlog empty, the
batch's result recorded). When each batch was committed is `committed_at` of the snapshot tagged
with its rel, read back from the table with the other contenders' tables (`summary`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from turnstile.local.bridge import wait_until
from turnstile_dev.bench import verify
from turnstile_dev.bench.turnstile_stack import CATALOG, TurnstileStack
from turnstile_dev.bench.workload import GATE, SCHEMA, SUCCESS, Workload

DATASET = "latency"
TABLE = "t0"


@dataclass
class LatencyRun:
    workload: Workload  # one table; batch 0 creates it, the others are timed
    success_written_at: dict[str, float] = field(default_factory=dict)  # rel -> epoch seconds
    success_write_seconds: dict[str, float] = field(default_factory=dict)  # the write call itself
    idle_again_seconds: dict[str, float] = field(default_factory=dict)  # until the table is idle again
    dataset: str = DATASET  # another on each stack that shares the warehouse

    @property
    def table(self) -> str:
        return f"{CATALOG}.{self.dataset}.{TABLE}"

    @property
    def timed_rels(self) -> list[str]:
        return self.workload.rels()[1:]


def run(
    stack: TurnstileStack,
    workload: Workload,
    repeats: int,
    timeout: float,
    progress: Callable[[str], None],
    *,
    dataset: str = DATASET,
) -> LatencyRun:
    """Batch 0 then `repeats` timed batches of `workload`'s shape, one after another."""
    store = stack.bucket
    shape = Workload(tables=1, batches=repeats + 1, files=workload.files, rows=workload.rows)
    result = LatencyRun(shape, dataset=dataset)
    prefix = f"{dataset}/{TABLE}"
    store.write(f"{dataset}/_config/ORDERME", b"")
    store.write(f"{dataset}/_config/load.json", json.dumps({"schema": SCHEMA}).encode())
    store.write(f"{prefix}/{GATE}", b"")
    for batch in range(shape.batches):
        rel = shape.rel(batch)
        folder = f"{prefix}/{rel}"
        for part in range(shape.files):
            store.write(f"{folder}/{shape.file_name(part)}", shape.csv(batch, part))
        written_at, started = time.time(), time.monotonic()
        store.write(f"{folder}/{SUCCESS}", b"")
        wrote = time.monotonic() - started
        if not wait_until(partial(stack.drained, prefix, batch + 1), timeout, 0.05):
            raise RuntimeError(
                f"latency: batch {rel} was not committed in {timeout:.0f} s; see {stack.home}/logs"
            )
        if batch:
            result.success_written_at[rel] = written_at
            result.success_write_seconds[rel] = wrote
            result.idle_again_seconds[rel] = time.monotonic() - started
    progress(f"latency: {repeats} batches committed one after another")
    return result


def nearest_rank(values: list[float], percent: float) -> float:
    """The smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(percent / 100 * len(ordered)) - 1, 0)]


def summary(run: LatencyRun, found: dict[str, Any]) -> dict[str, Any]:
    """Seconds from each timed `_SUCCESS` write to its tagged commit, from the table's snapshots
    (`verify.snapshots`), with the table's own correctness."""
    committed = {c["rel"]: c["committed_at_ms"] / 1000 for c in found["commits"] if c.get("rel")}
    missing = [rel for rel in run.timed_rels if rel not in committed]
    if missing:
        raise RuntimeError(f"latency: no commit tagged {missing[0]} in {run.table}")
    seconds = [committed[rel] - run.success_written_at[rel] for rel in run.timed_rels]
    shape = run.workload
    return {
        "runs": len(seconds),
        "median_seconds": statistics.median(seconds),
        "p95_seconds": nearest_rank(seconds, 95),
        "min_seconds": min(seconds),
        "max_seconds": max(seconds),
        "seconds": [round(s, 3) for s in seconds],
        "success_write_seconds_max": round(max(run.success_write_seconds.values()), 4),
        "idle_again_seconds_median": round(statistics.median(run.idle_again_seconds.values()), 3),
        "rows_per_batch": shape.files * shape.rows,
        "violations": verify.violations(found, shape.batches, shape.files * shape.rows).as_dict()
        | {"from_turnstile_rel": verify.rel_violations(found, shape.rels()).as_dict()},
    }


def markdown(r: dict[str, Any]) -> str:
    s = r["single_batch_latency"]
    v = s["violations"]
    row = [f"{s['runs']}"] + [f"{s[k]:.2f}" for k in ("median_seconds", "p95_seconds", "min_seconds")]
    return f"""| runs | median s | p95 s | min s | max s |
| --- | --- | --- | --- | --- |
| {" | ".join(row)} | {s["max_seconds"]:.2f} |

How it was taken: on the warm local stack of (a) and (b') (fake-gcs-server, functions/main.py
under functions-framework, the listing event bridge polling every 0.25 s, the warm driver already
started), one ordered table of its own, created by a first batch that is not counted. Then
{s["runs"]} batches of {s["rows_per_batch"]:,} rows, one after another, each to an idle table: its data
files, then `_SUCCESS`; the clock starts as the `_SUCCESS` write starts (the write itself took at
most {s["success_write_seconds_max"]:.3f} s) and stops at `committed_at` of the Iceberg snapshot
tagged with that batch's rel, read back from the table. The next batch was uploaded once the table
was idle again (lock free, backlog empty: {s["idle_again_seconds_median"]:.2f} s after the `_SUCCESS`
write, median). p95 is the nearest rank: the run at rank {math.ceil(0.95 * s["runs"])} of
{s["runs"]} from the fastest. Each latency covers the bridge noticing `_SUCCESS`, the
function publishing the batch, the subscriber claiming the table and writing the manifest, the
local runner queueing the job to its driver, and the job reading and committing the batch. Runs,
seconds: {s["seconds"]}. The table: {v["total"]} batches out of order, twice or missing.
"""
