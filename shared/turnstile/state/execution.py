"""The bucket side of running a job, shared by the PySpark job and the in-process runner.

Reads the manifest, applies its batches in order through a `BatchApplier`, writes one result record
per batch right after its commit, stops at the first failure, and ends with the done signal whose
finalize event wakes the subscriber. Knows nothing of locks, backlogs, runners or Spark: the
job contract every runner and the PySpark job build on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from turnstile.core.clock import Clock
from turnstile.core.errors import AuditFailed, BatchFailed, CorruptRecord, ExpectationFailed, TurnstileError
from turnstile.names.publishing import override_name
from turnstile.names.uris import parse_bucket_uri
from turnstile.state.records import (
    AUDIT_FAILURE,
    BatchOutcome,
    BatchResult,
    ExpectationCount,
    JobDone,
    Manifest,
    ManifestBatch,
    PublishOverride,
)
from turnstile.store.port import ObjectStore


class BatchApplier(Protocol):
    def committed_snapshot(self, batch: ManifestBatch) -> int | None:
        """The snapshot id of the commit that applied this (table, rel, `_SUCCESS` generation)
        already, or None when it is not among the table's committed batches."""

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        """Commit the batch as one commit tagged with its identity. Raises `BatchFailed`."""


def read_manifest(store: ObjectStore, manifest_uri: str) -> Manifest:
    found = store.read(parse_bucket_uri(manifest_uri).path)
    if found is None:
        raise BatchFailed(f"the manifest {manifest_uri} does not exist")
    return Manifest.decode(found.data, manifest_uri)


def _record(store: ObjectStore, name: str, result: BatchResult) -> None:
    """Write the batch's result record, unless it would replace the record of its commit: the
    history never loses a commit (a SKIPPED attempt after a COMMITTED one leaves it as it is)."""
    if result.outcome not in _WRITTEN:
        found = store.read(name)
        if found is not None and _outcome(found.data, name) in _APPLIED:
            return
    store.write(name, result.encode())


_WRITTEN = (
    BatchOutcome.COMMITTED,
    BatchOutcome.REPROCESSED,
    BatchOutcome.REBUILT,
    BatchOutcome.PUBLISHED_OVERRIDE,
)
_APPLIED = (*_WRITTEN, BatchOutcome.SKIPPED)


def _outcome(data: bytes, name: str) -> BatchOutcome | None:
    try:
        return BatchResult.decode(data, name).outcome
    except TurnstileError:
        return None  # unreadable: replaced by what this attempt saw


def execute(
    store: ObjectStore,
    manifest: Manifest,
    applier: BatchApplier,
    clock: Clock,
    stop_requested: Callable[[], bool] = lambda: False,
) -> JobDone:
    """Apply the manifest's batches in order, each its own commit and result record. When
    `stop_requested()` says so (a cancel of a job a warm driver runs), it stops before the next
    batch: what it committed stays committed, the rest has no record and is applied again later."""
    outcomes: dict[str, BatchOutcome] = {}
    error: str | None = None
    for listed in manifest.batches:
        if stop_requested():
            error = f"cancelled: stopped at a batch boundary, before batch {listed.rel!r}"
            break
        started = time.monotonic()
        batch = _with_override(store, listed)
        snapshot = applier.committed_snapshot(batch)
        if snapshot is not None:
            result = BatchResult(
                job_id=manifest.job_id,
                rel=batch.rel,
                success_generation=batch.success_generation,
                outcome=BatchOutcome.SKIPPED,
                snapshot_id=snapshot,  # the commit an earlier attempt made: history keeps it
            )
            if (override := batch.publish_override) is not None:  # published, its record not written
                result = overridden(result, override)
            if batch.rebuild is not None:  # the history still says which source change it was for
                result = result.model_copy(update={"cause": batch.rebuild})
        else:
            try:
                result = applier.apply(batch, manifest.job_id)
                if batch.rebuild is not None:  # a derived step rebuilt after a source changed
                    rebuilt = {"outcome": BatchOutcome.REBUILT, "cause": batch.rebuild}
                    result = result.model_copy(update=rebuilt)
                elif batch.reprocess is not None:  # committed once more, deliberately: history says so
                    result = result.model_copy(update={"outcome": BatchOutcome.REPROCESSED})
            except BatchFailed as exc:
                error = f"batch {batch.rel!r}: {exc}"
                if batch.publish_override is not None:  # it held for that staged commit only
                    store.remove(override_name(batch.table_prefix, batch.rel, batch.success_generation))
                result = BatchResult(
                    job_id=manifest.job_id,
                    rel=batch.rel,
                    success_generation=batch.success_generation,
                    outcome=BatchOutcome.FAILED,
                    error=str(exc),
                    # Too many bad rows: the record counts them, as their rows in `_failed/` do.
                    rows_read=exc.rows_read if isinstance(exc, CorruptRecord | ExpectationFailed) else 0,
                    bad_rows=exc.bad_rows if isinstance(exc, CorruptRecord) else 0,
                    expectations=_counts(exc),
                    error_kind=AUDIT_FAILURE if isinstance(exc, AuditFailed) else None,
                )
        result = result.model_copy(
            update={
                "finished_at": clock.now(),
                "seconds": result.seconds or round(time.monotonic() - started, 3),
            }
        )
        _record(store, batch.result, result)
        outcomes[batch.rel] = result.outcome
        if result.outcome is BatchOutcome.FAILED:
            error = error or f"batch {batch.rel!r}: {result.error or 'failed'}"
            break
    done = JobDone(
        job_id=manifest.job_id,
        succeeded=error is None,
        ordered=manifest.ordered,
        outcomes=outcomes,
        error=error,
    )
    store.write(manifest.done_signal, done.encode())
    return done


def overridden(result: BatchResult, override: PublishOverride) -> BatchResult:
    """The result of a batch published by `turnstile publish`: who published it, and why."""
    return result.model_copy(
        update={
            "outcome": BatchOutcome.PUBLISHED_OVERRIDE,
            "published_by": override.by,
            "publish_reason": override.reason,
        }
    )


def _with_override(store: ObjectStore, batch: ManifestBatch) -> ManifestBatch:
    """The batch with the operator's `turnstile publish` of it, when there is one (a batch of a
    table with audits only: no read for the others; never for a `turnstile reprocess` of it, a
    commit of its own that is audited)."""
    if batch.reprocess is not None or not (batch.load.audits or batch.audit_sql):
        return batch
    name = override_name(batch.table_prefix, batch.rel, batch.success_generation)
    found = store.read(name)
    if found is None:
        return batch
    return batch.model_copy(update={"publish_override": PublishOverride.decode(found.data, name)})


def _counts(exc: BatchFailed) -> tuple[ExpectationCount, ...]:
    """The expectation counts of a batch failed by an expectation (none for other failures)."""
    if not isinstance(exc, ExpectationFailed):
        return ()
    return tuple(ExpectationCount(name=n, on_fail=a, failed_rows=rows) for n, a, rows in exc.counts)
