"""An in-process JobRunner whose jobs apply batches to an in-memory table and record the order.

For functional tests and simulations: it runs the same bucket-side execution as the PySpark job
(`turnstile.state.execution`), with the same rule that a batch already committed is skipped, so what it
records is what an Iceberg table would hold.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import BatchFailed
from turnstile.jobs.port import JobState, JobStatus
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import BatchOutcome, BatchResult, ManifestBatch
from turnstile.store.port import ObjectStore


@dataclass
class MemoryTables:
    """Committed batches per table, in commit order: (rel, `_SUCCESS` generation)."""

    commits: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)  # rels whose application fails
    reprocessed: set[tuple[str, str]] = field(default_factory=set)  # (table prefix, request id)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def committed_snapshot(self, batch: ManifestBatch) -> int | None:
        """The commit's position in the table's log (1-based) stands for its snapshot id."""
        with self.lock:
            log = self.commits.get(batch.table_prefix, [])
            key = (batch.rel, batch.success_generation)
            if batch.reprocess is not None:  # committed under a key of its own, once per request
                done = (batch.table_prefix, batch.reprocess) in self.reprocessed
                return len(log) - log[::-1].index(key) if done else None
            return log.index(key) + 1 if key in log else None

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        if batch.rel in self.failing:
            raise BatchFailed(f"injected failure of {batch.rel!r}")
        with self.lock:
            self.commits.setdefault(batch.table_prefix, []).append((batch.rel, batch.success_generation))
            if batch.reprocess is not None:
                self.reprocessed.add((batch.table_prefix, batch.reprocess))
        return BatchResult(
            job_id=job_id,
            rel=batch.rel,
            success_generation=batch.success_generation,
            outcome=BatchOutcome.COMMITTED,
            rows_read=len(batch.data_uris),
        )

    def applied_rels(self, table_prefix: str) -> list[str]:
        with self.lock:
            return [rel for rel, _ in self.commits.get(table_prefix, [])]


class InlineRunner:
    """Runs each job when `run_pending` is called, or at once with `synchronous=True`."""

    def __init__(
        self,
        store: ObjectStore,
        tables: MemoryTables,
        *,
        synchronous: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._tables = tables
        self._synchronous = synchronous
        self._clock = clock or SystemClock()
        self._jobs: dict[str, JobStatus] = {}
        self._manifests: dict[str, str] = {}
        self._lock = threading.Lock()
        self.submitted: list[str] = []

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        with self._lock:
            if job_id in self._jobs:
                return
            self._jobs[job_id] = JobStatus(job_id, JobState.PENDING)
            self._manifests[job_id] = manifest_uri
            self.submitted.append(job_id)
        if self._synchronous:
            self.run(job_id)

    def status(self, job_id: str) -> JobStatus | None:
        with self._lock:
            return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            if job_id in self._jobs and not self._jobs[job_id].state.finished:
                self._jobs[job_id] = JobStatus(job_id, JobState.CANCELLED, "cancelled")

    def pending(self) -> list[str]:
        with self._lock:
            return [j for j, s in self._jobs.items() if s.state is JobState.PENDING]

    def run(self, job_id: str) -> JobStatus:
        with self._lock:
            self._jobs[job_id] = JobStatus(job_id, JobState.RUNNING)
            manifest_uri = self._manifests[job_id]
        try:
            done = execute(self._store, read_manifest(self._store, manifest_uri), self._tables, self._clock)
            status = JobStatus(job_id, JobState.SUCCEEDED if done.succeeded else JobState.FAILED, done.error)
        except BatchFailed as exc:
            status = JobStatus(job_id, JobState.FAILED, str(exc))
        with self._lock:
            self._jobs[job_id] = status
        return status
