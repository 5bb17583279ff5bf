"""Unordered tables: each `_SUCCESS` generation is one job, submitted at once.

The job id is derived from (table, rel, `_SUCCESS` generation): a duplicate event finds its job
already there and does nothing; a re-uploaded `_SUCCESS` is a new generation and applies again.
"""

from __future__ import annotations

from turnstile import logs
from turnstile.config import ResolvedConfig
from turnstile.paths import Batch
from turnstile.protocol.context import Invocation
from turnstile.protocol.jobids import unordered_job_id
from turnstile.protocol.manifests import manifest_batch, write_manifest
from turnstile.records import Manifest

log = logs.get("unordered")


def apply(inv: Invocation, batch: Batch, resolved: ResolvedConfig, success_generation: int) -> bool:
    """Submit the batch's job; False when that job exists already (a duplicate event)."""
    table = batch.table
    job_id = unordered_job_id(inv.settings.job_prefix, table, batch.rel, success_generation)
    if inv.runner.status(job_id) is not None:
        log.info("job already submitted", extra={"table": table.prefix, "rel": batch.rel, "job_id": job_id})
        return False
    manifest = Manifest(
        job_id=job_id,
        bucket=inv.store.bucket,
        ordered=False,
        done_signal=table.done_signal(job_id),
        batches=(manifest_batch(inv, batch, resolved, success_generation),),
    )
    uri = write_manifest(inv, table.manifest(job_id), manifest)
    inv.runner.submit(job_id, uri)
    log.info("job submitted", extra={"table": table.prefix, "rel": batch.rel, "job_id": job_id})
    return True
