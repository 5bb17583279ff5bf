"""`turnstile retry`: apply again an unordered batch whose job failed, after its cause was fixed.

The batch's failure record (`<table>/_turnstile/failures/<rel>/<generation>.json`) names the
attempt that failed; the retry submits the next attempt under its own job id and removes the
record, so `status` stops listing it (a new failure writes a new one). An ordered table's failed
batch holds the table's lock instead: `turnstile unlock` is its retry.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import Table
from turnstile.ops.errors import Refused
from turnstile.protocol import unordered
from turnstile.protocol.context import Invocation
from turnstile.protocol.jobids import unordered_job_id
from turnstile.state.records import BatchFailure
from turnstile.store.port import object_uri


@dataclass(frozen=True)
class Retried:
    batch: str  # gs:// or s3:// URI of the batch folder
    generation: int
    attempt: int
    job_id: str
    submitted: bool  # False: the job of this attempt existed already, or its submit was refused
    error: str  # what the failed attempt reported
    refused: str | None = None  # why this attempt's submit was refused (recorded as a new failure)

    def lines(self) -> list[str]:
        if self.refused:
            return [
                f"{self.batch}: attempt {self.attempt + 1} was not submitted: {self.refused}",
                "it is recorded as failed again; turnstile status shows it",
            ]
        verb = "submitted" if self.submitted else "found already submitted"
        return [
            f"{self.batch}: attempt {self.attempt + 1} {verb} as job {self.job_id}",
            f"the attempt before failed with: {self.error}",
            "follow it with: turnstile status",
        ]


DOES = (
    "Apply again an unordered batch whose job failed (after fixing the cause): its next attempt runs "
    "under a new job id. An ordered table's failed batch is retried with turnstile unlock."
)


def failures(inv: Invocation, table: Table, limit: int | None = None) -> list[BatchFailure]:
    """The table's failure records (the first `limit`), in rel order."""
    found = []
    for info in inv.store.list_entries(table.failures, limit=limit):
        read = inv.store.read(info.name)
        if read is not None:
            found.append(BatchFailure.decode(read.data, object_uri(inv.store, info.name)))
    return found


def retry(inv: Invocation, success_name: str) -> Retried:
    """Submit the next attempt of the batch whose `_SUCCESS` is `success_name`."""
    batch, resolved = inv.batch(success_name)
    table = batch.table
    where, folder = object_uri(inv.store, table.prefix), object_uri(inv.store, batch.folder)
    if resolved.ordered or inv.settings.order_per_table:
        raise Refused(
            f"{folder} belongs to an ordered table, whose failed batch holds the table's lock; "
            f"see turnstile status {where} and retry it with turnstile unlock {where}"
        )
    live = inv.store.stat(success_name)
    if live is None:
        raise Refused(_no_batch(inv, batch.rel, table, success_name))
    found = inv.store.read(table.failure(batch.rel, live.generation))
    if found is None:
        raise Refused(
            f"{folder} has no failed job for its _SUCCESS generation {live.generation}; "
            f"turnstile status {where} lists the failed batches"
        )
    failure = BatchFailure.decode(found.data, object_uri(inv.store, found.name))
    applied = unordered.apply(inv, batch, resolved, live.generation, failure.attempt)
    try:  # only the record read: a submit refused just now wrote the new attempt's own
        inv.store.delete(found.name, if_generation=found.generation)
    except PreconditionFailed:
        pass
    job_id = unordered_job_id(inv.settings.job_prefix, table, batch.rel, live.generation, failure.attempt)
    refusal = None
    if applied is unordered.Applied.FAILED:
        now = inv.store.read(table.failure(batch.rel, live.generation))
        refusal = BatchFailure.decode(now.data, object_uri(inv.store, now.name)).error if now else "refused"
    return Retried(
        folder,
        live.generation,
        failure.attempt,
        job_id,
        applied is unordered.Applied.SUBMITTED,
        failure.error,
        refusal,
    )


def _no_batch(inv: Invocation, rel: str, table: Table, success_name: str) -> str:
    """Why there is no `_SUCCESS` to retry: a table's URI given, a typo, or a batch not uploaded."""
    where = object_uri(inv.store, table.prefix)
    if not rel:
        return (
            f"{where} names table {table.dataset}.{table.table}, not a batch; pass the failed batch's "
            f"folder, {where}/REL (turnstile status {where} lists the failed batches)"
        )
    if not inv.store.list_entries(f"{table.prefix}/", limit=1):
        return f"nothing is stored under {where}: no table there; check the name"
    return (
        f"{object_uri(inv.store, success_name)} does not exist: no batch there; check the path "
        f"(turnstile status {where} lists the failed batches), or upload the batch"
    )
