"""Scale: the subscriber's time per batch behind a deep backlog, and many tables at once.

Both in process through functions/main.py (`counting.FunctionHost`), jobs in process, so what is
timed is the protocol alone.

- Deep backlog: a table whose backlog holds 10,000 pointers (each with its batch folder and
  `_SUCCESS`) against one holding 10; the same number of batches is applied from each, and the
  function-seconds per applied batch compared. Over the in-memory store, whose listings honour
  their limit as GCS's do (the emulator scans its whole bucket on every listing, so a deep backlog
  there would measure the emulator).
- Many tables: every table's batches uploaded out of order, then the events delivered by four
  concurrent senders (as the local event bridge does) against fake-gcs-server; batches per second
  with 20 tables against 1.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from turnstile.config.load_config import LoadConfig
from turnstile.names.paths import Table
from turnstile.state.records import Pointer
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore
from turnstile_dev.bench.counting import FunctionHost
from turnstile_dev.bench.workload import SUCCESS, Workload

DATASET = "scale"


def _queue_directly(host: FunctionHost, workload: Workload, table: str, first: int, count: int) -> None:
    """Batches `first`..`first+count-1` of `table` already published: data, `_SUCCESS`, pointer
    (written to the bucket directly: no events, as if published long ago)."""
    store = host.inner
    t = Table(store.bucket, f"{DATASET}/{table}", DATASET, table)
    now = datetime.now(UTC)
    for batch in range(first, first + count):
        rel = workload.rel(batch)
        for part in range(workload.files):
            store.write(f"{t.prefix}/{rel}/{workload.file_name(part)}", b"id\n1\n")
        success = f"{t.prefix}/{rel}/{SUCCESS}"
        generation = store.write(success, b"")
        store.write(
            t.pointer(rel), Pointer(success=success, success_generation=generation, published_at=now).encode()
        )


def _noticed(host: FunctionHost, jobs: int) -> bool:
    """The ends of `jobs` jobs have reached the subscriber (their done signals were delivered)."""
    return sum(d.kind == "job_done" for d in host.deliveries) >= jobs


def _subscriber_seconds(host: FunctionHost, since: int) -> float:
    return sum(d.seconds for d in host.deliveries[since:])


def _cycles(host: FunctionHost, table: str, jobs: int, top_up: Callable[[], None] | None) -> None:
    """Start the subscriber, then let `jobs` jobs run and their ends be noticed; `top_up` is called
    once per job, while it is submitted and not yet run."""
    host.upstream.write(f"{table}/_BACKFILL", b"")  # as the sweeper or an operator would
    for k in range(1, jobs + 1):
        host.drain(until=lambda: bool(host.runner.pending()))
        if top_up is not None:
            top_up()
        host.drain(until=partial(_noticed, host, k))


def _deep_once(queued: int, refill: bool, batches: int, files: int) -> dict[str, Any]:
    per_job = LoadConfig.model_validate({}).max_batches_per_job
    jobs = -(-batches // per_job)
    workload = Workload(1, queued + jobs * per_job + per_job, files, 1)
    table = f"{DATASET}/t0"
    host = FunctionHost(MemoryStore("bench-scale"), gate=None)
    with host.serving():
        host.configure(DATASET, None)
        host.drain()
        _queue_directly(host, workload, "t0", 0, queued)
        next_batch = [queued]

        def top_up() -> None:  # keep `queued` pointers waiting behind the running job
            _queue_directly(host, workload, "t0", next_batch[0], per_job)
            next_batch[0] += per_job

        # The in-memory bucket lives in this process's heap, a real one does not: keep the garbage
        # collector from walking its objects during the timed part (it would, more for 10,000).
        gc.collect()
        gc.freeze()
        try:
            since, ops_before = len(host.deliveries), host.ledger.total("function")
            _cycles(host, table, jobs, top_up if refill else None)
        finally:
            gc.unfreeze()
        seconds = _subscriber_seconds(host, since)
        ops = host.ledger.total("function") - ops_before
        applied = len(host.tables.applied_rels(table))
    return {"backlog": queued, "applied": applied, "seconds": seconds, "ops": ops}


def deep_backlog(depth: int, shallow: int, batches: int, files: int, repeats: int = 3) -> dict[str, Any]:
    """Function-seconds per applied batch with `depth` pointers queued against `shallow` ones.

    Both keep the subscriber busy the same way: it applies `batches` batches in jobs of
    `max_batches_per_job`, each job's end noticed through its done signal, and the shallow backlog
    is topped up while each job runs so that `shallow` pointers always wait behind it. The two
    alternate `repeats` times; the medians are compared."""
    runs: dict[str, list[dict[str, Any]]] = {"shallow": [], "deep": []}
    for _ in range(repeats):
        runs["shallow"].append(_deep_once(shallow, True, batches, files))
        runs["deep"].append(_deep_once(depth, False, batches, files))
    results: dict[str, Any] = {}
    for label, found in runs.items():
        per_batch = sorted(r["seconds"] / r["applied"] for r in found)
        results[label] = {
            "backlog": found[0]["backlog"],
            "applied": found[0]["applied"],
            "seconds_per_batch": statistics.median(per_batch),
            "seconds_per_batch_runs": per_batch,
            "function_ops_per_batch": round(found[0]["ops"] / found[0]["applied"], 2),
        }
    deep, flat = results["deep"]["seconds_per_batch"], results["shallow"]["seconds_per_batch"]
    results["deep_backlog_ratio"] = deep / flat
    return results


def _throughput(store: ObjectStore, workload: Workload, workers: int) -> dict[str, Any]:
    host = FunctionHost(store, gate=None)
    with host.serving():
        host.configure(DATASET, None)
        host.drain()
        for table, batch in workload.arrival():
            host.upload_batch(workload, DATASET, table, batch)
        started = time.perf_counter()
        host.drain(workers=workers)
        wall = time.perf_counter() - started
    tables = [f"{DATASET}/{workload.table(t)}" for t in range(workload.tables)]
    in_order = all(host.tables.applied_rels(t) == workload.rels() for t in tables)
    return {
        "tables": workload.tables,
        "batches": workload.total_batches,
        "seconds": wall,
        "batches_per_second": workload.total_batches / wall,
        "function_seconds_per_batch": sum(d.seconds for d in host.deliveries) / workload.total_batches,
        "applied_in_order_once": in_order,
    }


def many_tables(store_for: Any, tables: int, batches: int, files: int, workers: int = 4) -> dict[str, Any]:
    """Protocol throughput with `tables` tables against one; `store_for(name)` gives a fresh bucket."""
    base = Workload(1, batches, files, 10)
    one = _throughput(store_for("scale-one"), base, workers)
    many = _throughput(store_for("scale-many"), base.with_tables(tables), workers)
    return {
        "one_table": one,
        "many_tables": many,
        "throughput_ratio": many["batches_per_second"] / one["batches_per_second"],
        "function_seconds_ratio": many["function_seconds_per_batch"] / one["function_seconds_per_batch"],
    }
