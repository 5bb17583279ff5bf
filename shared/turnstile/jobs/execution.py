"""The bucket side of running a job, shared by the PySpark job and the in-process runner.

Reads the manifest, applies its batches in order through a `BatchApplier`, writes one result record
per batch right after its commit, stops at the first failure, and ends with the done signal whose
finalize event wakes the subscriber. Knows nothing of locks or backlogs.
"""

from __future__ import annotations

import time
from typing import Protocol

from turnstile.clock import Clock
from turnstile.paths import parse_bucket_uri
from turnstile.records import BatchOutcome, BatchResult, JobDone, Manifest, ManifestBatch
from turnstile.store.port import ObjectStore


class BatchFailed(Exception):
    """The batch cannot be applied (bad data, schema conflict, failing SQL): the job stops here."""


class BatchApplier(Protocol):
    def already_applied(self, batch: ManifestBatch) -> bool:
        """True when this (table, rel, `_SUCCESS` generation) is among the table's committed batches."""

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        """Commit the batch as one commit tagged with its identity. Raises `BatchFailed`."""


def read_manifest(store: ObjectStore, manifest_uri: str) -> Manifest:
    found = store.read(parse_bucket_uri(manifest_uri).path)
    if found is None:
        raise BatchFailed(f"the manifest {manifest_uri} does not exist")
    return Manifest.decode(found.data, manifest_uri)


def execute(store: ObjectStore, manifest: Manifest, applier: BatchApplier, clock: Clock) -> JobDone:
    outcomes: dict[str, BatchOutcome] = {}
    error: str | None = None
    for batch in manifest.batches:
        started = time.monotonic()
        if applier.already_applied(batch):
            result = BatchResult(
                job_id=manifest.job_id,
                rel=batch.rel,
                success_generation=batch.success_generation,
                outcome=BatchOutcome.SKIPPED,
            )
        else:
            try:
                result = applier.apply(batch, manifest.job_id)
            except BatchFailed as exc:
                error = f"batch {batch.rel!r}: {exc}"
                result = BatchResult(
                    job_id=manifest.job_id,
                    rel=batch.rel,
                    success_generation=batch.success_generation,
                    outcome=BatchOutcome.FAILED,
                    error=str(exc),
                )
        result = result.model_copy(
            update={
                "finished_at": clock.now(),
                "seconds": result.seconds or round(time.monotonic() - started, 3),
            }
        )
        store.write(batch.result, result.encode())
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
