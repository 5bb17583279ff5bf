"""A bucket as the operator console finds it after days of work: many ordered tables with their
records (batches, result records, locks, backlog pointers, watermarks), a few blocked, a few with
batches queued, derived tables waiting on their sources. Written straight as the protocol writes
its records, so it fills in seconds what the stack would take hours to apply.

Layout: `src<d>/t<n>` tables with hourly batches (`2024/05/<day>/<hour>`, natural_time hourly),
ordered by an ORDERME at the bucket root; every QUEUED_EVERY-th table has QUEUED batches still in
its backlog, every BLOCKED_EVERY-th is blocked on the first of them; `mart/d<n>` derived tables
each depend on two sources, one of which is behind.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from turnstile.names.paths import Table
from turnstile.protocol import watermarks
from turnstile.protocol.lock import unlock_command
from turnstile.state.records import (
    BatchOutcome,
    BatchResult,
    CoveredBatch,
    Lock,
    LockState,
    Pointer,
    Watermark,
)
from turnstile.store.port import ObjectStore

START = datetime(2024, 5, 1, tzinfo=UTC)
QUEUED = 3  # batches still queued in a table that has some
QUEUED_EVERY = 4
BLOCKED_EVERY = 20
DERIVED_EVERY = 25  # one derived table per so many tables
SOURCE_LOAD = {"natural_time": "hourly", "schema": "ts TIMESTAMP, v DOUBLE"}

Write = tuple[str, bytes, datetime]  # object, bytes, when it is written


class WriteClock:
    """The clock of a MemoryStore being filled: each object's update time is when `fill` says it
    was written, not when the bench ran."""

    def __init__(self) -> None:
        self.at = START

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


@dataclass(frozen=True)
class Filled:
    tables: int
    batches: int  # batches written (applied, queued or failed)
    objects: int
    blocked: tuple[str, ...]  # table folders
    derived: tuple[str, ...]
    end: datetime  # the time of the last write: "now" for the bucket


def rel_of(hour: int) -> str:
    return (START + timedelta(hours=hour)).strftime("%Y/%m/%d/%H")


def fill(
    store: ObjectStore,
    tables: int = 200,
    batches: int = 10_000,
    *,
    clock: WriteClock | None = None,
    workers: int = 1,
) -> Filled:
    """Write the bucket: `tables` tables (one in DERIVED_EVERY derived) sharing about `batches`
    batches. With `clock` (the store's), objects are written in time order at their own times; an
    emulator's are written by `workers` threads, at the time they are written."""
    derived_count = tables // DERIVED_EVERY if tables >= DERIVED_EVERY else (1 if tables >= 3 else 0)
    sources = tables - derived_count
    per_table = max(QUEUED + 1, batches // tables)
    writes: list[Write] = [("_config/ORDERME", b"", START)]
    blocked, derived, source_prefixes = [], [], []
    for n in range(sources):
        prefix = f"src{n % 10}/t{n:03d}"
        source_prefixes.append(prefix)
        table = Table(store.bucket, prefix, f"src{n % 10}", f"t{n:03d}")
        queued = QUEUED if n % QUEUED_EVERY == QUEUED_EVERY - 1 else 0
        is_blocked = n % BLOCKED_EVERY == BLOCKED_EVERY - 1
        writes += _source(
            table, per_table, queued=queued or (QUEUED if is_blocked else 0), blocked=is_blocked
        )
        if is_blocked:
            blocked.append(prefix)
    for dataset in sorted({p.partition("/")[0] for p in source_prefixes}):
        writes.append((f"{dataset}/_config/load.json", json.dumps(SOURCE_LOAD).encode(), START))
    for n in range(derived_count):
        prefix = f"mart/d{n:03d}"
        table = Table(store.bucket, prefix, "mart", f"d{n:03d}")
        pair = (source_prefixes[(2 * n) % sources], source_prefixes[(2 * n + 1) % sources])
        writes += _derived(table, pair, per_table)
        derived.append(prefix)
    _write_all(store, writes, clock, workers)
    return Filled(
        tables,
        sources * per_table + derived_count * per_table,
        len(writes),
        tuple(blocked),
        tuple(derived),
        max(when for _, _, when in writes),
    )


def _source(table: Table, count: int, *, queued: int, blocked: bool) -> list[Write]:
    writes: list[Write] = []
    applied = count - queued
    for hour in range(count):
        rel = rel_of(hour)
        folder = table.batch_folder(rel)
        generation = 1_000 + hour
        arrived = START + timedelta(hours=hour + 1, minutes=2)
        writes.append((f"{folder}part-0.csv", b"ts,v\n", arrived - timedelta(seconds=30)))
        writes.append((f"{folder}_SUCCESS", b"", arrived))
        if hour < applied:
            writes.append((table.result(rel, generation), _result(table, rel, generation, arrived), arrived))
        else:
            pointer = Pointer(
                success=f"{folder}_SUCCESS", success_generation=generation, published_at=arrived
            )
            writes.append((table.pointer(rel), pointer.encode(), arrived))
    position = rel_of(applied - 1)
    at = START + timedelta(hours=applied, minutes=4)
    lock = Lock(
        state=LockState.FREE, position=position, history=(f"turnstile-{table.table}-job",), updated_at=at
    )
    if blocked:
        head = rel_of(applied)
        failed_at = START + timedelta(hours=applied + 1, minutes=5)
        lock = Lock(
            state=LockState.FAILED,
            job_id=f"turnstile-{table.table}-{applied:04d}",
            covers=(
                CoveredBatch(
                    rel=head,
                    pointer=table.pointer(head),
                    pointer_generation=1,
                    success_generation=1_000 + applied,
                ),
            ),
            acquired_at=failed_at - timedelta(minutes=1),
            updated_at=failed_at,
            error=(
                '[CAST_INVALID_INPUT] The value \'n/a\' of the type "STRING" cannot be cast to "DOUBLE" in '
                f"gs://{table.bucket}/{table.batch_folder(head)}part-0.csv"
            ),
            failed_rel=head,
            unlock_command=unlock_command(table),
            position=position,
        )
        at = failed_at
    writes.append((table.lock, lock.encode(), at))
    mark = Watermark(watermark=START + timedelta(hours=applied), rel=position, updated_at=at)
    writes.append((watermarks.watermark_object(table), mark.encode(), at))
    return writes


def _derived(table: Table, sources: tuple[str, str], count: int) -> list[Write]:
    load = {
        "derived": {"step": "1h", "start": START.isoformat().replace("+00:00", "Z")},
        "depends_on": [s.replace("/", ".") for s in sources],
    }
    writes: list[Write] = [
        (f"{table.prefix}/_config/load.json", json.dumps(load).encode(), START),
        (f"{table.prefix}/_config/transform.sql", b"SELECT 1 AS one", START),
    ]
    applied = count - QUEUED  # its sources with queued batches are behind: it waits
    for hour in range(applied):
        rel = rel_of(hour)
        done = START + timedelta(hours=hour + 1, minutes=5)
        writes.append((table.result(rel, 1), _result(table, rel, 1, done), done))
    at = START + timedelta(hours=applied, minutes=6)
    writes.append(
        (table.lock, Lock(state=LockState.FREE, position=rel_of(applied - 1), updated_at=at).encode(), at)
    )
    mark = Watermark(watermark=START + timedelta(hours=applied), rel=rel_of(applied - 1), updated_at=at)
    writes.append((watermarks.watermark_object(table), mark.encode(), at))
    return writes


def _result(table: Table, rel: str, generation: int, arrived: datetime) -> bytes:
    return BatchResult(
        job_id=f"turnstile-{table.table}-{generation}",
        rel=rel,
        success_generation=generation,
        outcome=BatchOutcome.COMMITTED,
        rows_read=1000,
        rows_written=1000,
        seconds=4.0,
        snapshot_id=generation,
        finished_at=arrived + timedelta(minutes=1),
    ).encode()


def _write_all(store: ObjectStore, writes: list[Write], clock: WriteClock | None, workers: int) -> None:
    if clock is not None or workers <= 1:
        for name, data, when in sorted(writes, key=lambda w: w[2]):
            if clock is not None:
                clock.at = when
            store.write(name, data)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda w: store.write(w[0], w[1]), writes))
