"""Exact function invocations, storage operations and function-seconds, counted in process.

The local stack's function host is another process, so the counts come from a run of the same
workload through the same entrypoint, functions/main.py under functions-framework (a CloudEvent per
finalized object, as Eventarc sends them; an answer of 500 is delivered again), in this process:
the bucket is wrapped by `counting_store` (a `RecordingStore`), which counts every operation at
the store port by kind, by who made it (upstream, the function, the job) and by the call site in
turnstile that made it, and turns every finalized write into a queued event; the jobs run in
process (`InlineRunner`, bucket side of the real job: manifest, result records, done signal)
between deliveries, never inside an invocation, so function-seconds are the invocations' own time.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from cloudevents.conversion import to_binary
from functions_framework import create_app

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.local.bridge import cloud_event
from turnstile.local.stack import functions_source
from turnstile.names.paths import classify
from turnstile.names.placement import MOVED_MARKER
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.store.split import SplitStore
from turnstile_dev.bench.workload import GATE, SCHEMA, SUCCESS, Workload

Key = tuple[str, str, str, str]  # who (upstream, function, job), event kind, operation, call site


def call_site() -> str:
    """The innermost turnstile function outside the store and the benchmark: who asked."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("turnstile.") and not module.startswith("turnstile.store"):
            return f"{module.removeprefix('turnstile.')}:{frame.f_code.co_name}"
        frame = frame.f_back
    return "benchmark"


class Ledger:
    """Operation counts, thread safe; `handling` says which event's invocation is running."""

    def __init__(self) -> None:
        self.ops: Counter[Key] = Counter()
        self.conflicts: Counter[Key] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()

    def made(self) -> int:
        """Operations this thread has made so far."""
        return int(getattr(self._local, "made", 0))

    @contextmanager
    def handling(self, kind: str) -> Iterator[None]:
        self._local.kind = kind
        try:
            yield
        finally:
            self._local.kind = None

    def count(self, who: str, op: str, site: str, *, conflict: bool = False) -> None:
        key = (who, getattr(self._local, "kind", None) or "-", op, site)
        self._local.made = getattr(self._local, "made", 0) + 1
        with self._lock:
            self.ops[key] += 1
            if conflict:
                self.conflicts[key] += 1

    def total(self, who: str) -> int:
        return sum(n for key, n in self.ops.items() if key[0] == who)

    def by(self, who: str, part: int) -> Counter[str]:
        """Counts of one party's operations grouped by kind (1), operation (2) or call site (3)."""
        found: Counter[str] = Counter()
        for key, n in self.ops.items():
            if key[0] == who:
                found[key[part]] += n
        return found


def counting_store(
    inner: ObjectStore, who: str, ledger: Ledger, on_finalized: Callable[[str, int], None]
) -> RecordingStore:
    """The store port as one party (`who`) sees it: every operation counted in `ledger` with its
    call site, every finalized write queued as an event."""

    def count(op: str, conflict: bool) -> None:
        ledger.count(who, op, call_site(), conflict=conflict)

    return RecordingStore(inner, on_finalized, on_operation=count)


@dataclass
class Delivery:
    name: str
    kind: str
    seconds: float
    status: int
    ops: int  # storage operations the invocation made


@dataclass
class FunctionHost:
    """functions/main.py in process over `inner`, with counted storage and queued events."""

    inner: ObjectStore
    gate: str | None = GATE
    state: ObjectStore | None = None  # STATE_BUCKET: turnstile's own objects there, no events
    ledger: Ledger = field(default_factory=Ledger)
    events: deque[tuple[str, int]] = field(default_factory=deque)
    deliveries: list[Delivery] = field(default_factory=list)
    tables: MemoryTables = field(default_factory=MemoryTables)
    log: io.StringIO = field(default_factory=io.StringIO)

    def __post_init__(self) -> None:
        if self.state is not None:  # a state bucket from the start: the first sweep says so
            self.state.write(MOVED_MARKER, self.inner.bucket.encode())
        self.upstream = counting_store(self.inner, "upstream", self.ledger, self._queue)
        self.function_store = self._party("function")
        self.job_store = self._party("job")
        self.runner = InlineRunner(self.job_store, self.tables, synchronous=False)
        self._app: Any = None
        self._lock = threading.Lock()
        self._taken: set[str] = set()

    def _party(self, who: str) -> ObjectStore:
        """The store one party writes through: the bucket, or with a state bucket both, where only
        the bucket's writes are events (no trigger watches the state bucket)."""
        data = counting_store(self.inner, who, self.ledger, self._queue)
        if self.state is None:
            return data
        return SplitStore(data, counting_store(self.state, who, self.ledger, lambda name, generation: None))

    def _queue(self, name: str, generation: int) -> None:
        self.events.append((name, generation))

    @contextmanager
    def serving(self) -> Iterator[FunctionHost]:
        """Patch the wiring and the environment the entrypoint reads; undo both on exit."""
        saved_env = {key: os.environ.get(key) for key in Settings.variables()}
        saved_wiring = (wiring.object_store, wiring.job_runner)
        for key in saved_env:
            os.environ.pop(key, None)
        os.environ["LOG_LEVEL"] = "INFO"
        if self.gate:
            os.environ["START_BACKFILL_FILENAME"] = self.gate
        wiring.object_store = lambda settings, bucket: self.function_store
        wiring.job_runner = lambda settings, store: self.runner
        logs.configure("INFO", self.log)
        self._app = create_app(  # type: ignore[no-untyped-call]
            target="on_object_finalized", source=str(functions_source()), signature_type="cloudevent"
        )
        try:
            yield self
        finally:
            wiring.object_store, wiring.job_runner = saved_wiring
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            logs.configure("INFO", sys.stderr)

    def deliver(self, client: Any, name: str, generation: int) -> Delivery:
        kind = classify(name, SUCCESS, self.gate).value
        headers, body = to_binary(cloud_event(self.inner.bucket, name, generation))
        before = self.ledger.made()
        with self.ledger.handling(kind):
            started = time.perf_counter()
            status = int(client.post("/", headers=headers, data=body).status_code)
            seconds = time.perf_counter() - started
        delivery = Delivery(name, kind, seconds, status, self.ledger.made() - before)
        with self._lock:
            self.deliveries.append(delivery)
        if status >= 500:
            self.events.append((name, generation))  # Eventarc retries
        return delivery

    def _next(self) -> tuple[str, Any] | None:
        with self._lock:
            if self.events:
                return "event", self.events.popleft()
            for job in self.runner.pending():
                if job not in self._taken:
                    self._taken.add(job)
                    return "job", job
        return None

    def drain(self, *, workers: int = 1, until: Callable[[], bool] | None = None) -> None:
        """Deliver events, and run each submitted job once no event waits (jobs run outside any
        invocation, as the real ones do), until nothing is left or `until()` holds."""
        assert self._app is not None, "use inside serving()"
        busy = [0]
        lock = threading.Lock()
        errors: list[BaseException] = []

        def work() -> None:
            try:
                loop()
            except BaseException as exc:  # reported by drain() in the caller's thread
                errors.append(exc)

        def loop() -> None:
            client = self._app.test_client()
            while True:
                if errors:
                    return
                if until is not None and until():
                    return
                with lock:
                    task = self._next()
                    if task is None and busy[0] == 0:
                        return
                    if task is not None:
                        busy[0] += 1
                if task is None:
                    time.sleep(0.001)
                    continue
                try:
                    if task[0] == "event":
                        self.deliver(client, *task[1])
                    else:
                        with self.ledger.handling("job"):
                            self.runner.run(task[1])
                finally:
                    with lock:
                        busy[0] -= 1

        threads = [threading.Thread(target=work) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise RuntimeError(f"the in-process run failed: {errors[0]!r}") from errors[0]

    def configure(self, dataset: str, max_batches_per_job: int | None) -> None:
        load: dict[str, Any] = {"schema": SCHEMA}
        if max_batches_per_job is not None:
            load["max_batches_per_job"] = max_batches_per_job
        self.upstream.write(f"{dataset}/_config/ORDERME", b"")
        self.upstream.write(f"{dataset}/_config/load.json", json.dumps(load).encode())

    def upload_batch(self, workload: Workload, dataset: str, table: int, batch: int) -> None:
        folder = f"{dataset}/{workload.table(table)}/{workload.rel(batch)}"
        for part in range(workload.files):
            self.upstream.write(f"{folder}/{workload.file_name(part)}", workload.csv(batch, part))
        self.upstream.write(f"{folder}/{SUCCESS}", b"")


def run_workload(
    inner: ObjectStore,
    workload: Workload,
    dataset: str,
    max_batches_per_job: int | None,
    state: ObjectStore | None = None,
) -> dict[str, Any]:
    """The stack run's sequence in process: batches uploaded out of order, each delivered as it
    arrives while the gate holds the tables, then the gates, then every event and job until the
    tables are drained. Returns the counts per batch and the order the batches were applied in.
    With `state`, turnstile's own objects go there (STATE_BUCKET)."""
    host = FunctionHost(inner, state=state)
    with host.serving():
        host.configure(dataset, max_batches_per_job)
        host.drain()
        for table, batch in workload.arrival():
            host.upload_batch(workload, dataset, table, batch)
            host.drain()
        for table in range(workload.tables):
            host.upstream.write(f"{dataset}/{workload.table(table)}/{GATE}", b"")
        host.drain()
    return summarize(host, workload, dataset)


def summarize(host: FunctionHost, workload: Workload, dataset: str) -> dict[str, Any]:
    batches = workload.total_batches
    ledger = host.ledger

    def per_batch(n: float) -> float:
        return round(n / batches, 3)

    kinds: Counter[str] = Counter(d.kind for d in host.deliveries)
    seconds_by_kind: Counter[str] = Counter()
    for d in host.deliveries:
        seconds_by_kind[d.kind] += d.seconds  # type: ignore[assignment]
    acting = sum(1 for d in host.deliveries if d.ops)
    applied = {
        workload.table(t): host.tables.applied_rels(f"{dataset}/{workload.table(t)}")
        for t in range(workload.tables)
    }
    expected = workload.rels()
    function_ops = ledger.total("function")
    job_ops = ledger.total("job")
    return {
        "batches": batches,
        "jobs": len(host.runner.submitted),
        "invocations": len(host.deliveries),
        "invocations_per_batch": per_batch(len(host.deliveries)),
        "acting_invocations_per_batch": per_batch(acting),
        "invocations_per_batch_without_data_files": per_batch(len(host.deliveries) - kinds["data"]),
        "invocations_by_kind_per_batch": {k: per_batch(n) for k, n in sorted(kinds.items())},
        "redeliveries": sum(1 for d in host.deliveries if d.status >= 500),
        "function_seconds_per_batch": round(sum(d.seconds for d in host.deliveries) / batches, 4),
        "function_seconds_by_kind_per_batch": {
            k: round(v / batches, 4) for k, v in sorted(seconds_by_kind.items())
        },
        "function_ops_per_batch": per_batch(function_ops),
        "job_ops_per_batch": per_batch(job_ops),
        "storage_ops_per_batch": per_batch(function_ops + job_ops),
        "upstream_ops_per_batch": per_batch(ledger.total("upstream")),
        "function_ops_by_operation_per_batch": {
            k: per_batch(n) for k, n in ledger.by("function", 2).most_common()
        },
        "function_ops_by_event_per_batch": {
            k: per_batch(n) for k, n in ledger.by("function", 1).most_common()
        },
        "function_ops_by_site_per_batch": {
            k: per_batch(n) for k, n in ledger.by("function", 3).most_common()
        },
        "job_ops_by_site_per_batch": {k: per_batch(n) for k, n in ledger.by("job", 3).most_common()},
        "job_ops_by_operation_per_batch": {k: per_batch(n) for k, n in ledger.by("job", 2).most_common()},
        "function_ops_by_site_and_operation_per_batch": {
            key: per_batch(n) for key, n in _site_and_operation(ledger, "function").most_common()
        },
        "conflicts_per_batch": per_batch(sum(n for k, n in ledger.conflicts.items() if k[0] == "function")),
        "conflicts_by_site_per_batch": {
            f"{k[3]} {k[2]}": per_batch(n) for k, n in ledger.conflicts.most_common() if k[0] == "function"
        },
        "applied_in_order_once": all(rels == expected for rels in applied.values()),
    }


def _site_and_operation(ledger: Ledger, who: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for (party, _, op, site), n in ledger.ops.items():
        if party == who:
            found[f"{site} {op}"] += n
    return found
