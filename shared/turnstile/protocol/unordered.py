"""Unordered tables: each `_SUCCESS` generation is one job, submitted at once.

The job id is derived from (table, rel, `_SUCCESS` generation, attempt): a duplicate event finds its
job already there and does nothing; a re-uploaded `_SUCCESS` is a new generation and applies again.
From its submit until its end is handled, a job has a marker `<table>/_turnstile/open/<job>.json`,
which the sweeper's watchdog looks at. A job that fails leaves a failure record
`<table>/_turnstile/failures/<rel>/<generation>.json` and an alert: a transient failure is retried
by the sweeper with backoff until `job_retries` run out; any other waits for `turnstile retry`.
While the table is paused (`turnstile pause`) no job starts: a batch that arrives is held
(`<table>/_turnstile/held/<rel>/<generation>.json`) and submitted once `turnstile resume` wakes the
table (or, should that wake-up be lost, by the next sweep); due retries wait for the resume too.
"""

from __future__ import annotations

from enum import StrEnum

from turnstile.config.cascade import ResolvedConfig
from turnstile.config.load_config import LoadConfig
from turnstile.core import logs
from turnstile.core.errors import ConfigError, JobDeferred, JobError, PathError, PreconditionFailed
from turnstile.names.paths import Batch, Table
from turnstile.protocol import retries
from turnstile.protocol.context import Invocation
from turnstile.protocol.jobids import unordered_job_id
from turnstile.protocol.manifests import manifest_batch, write_manifest
from turnstile.state.records import (
    BatchFailure,
    BatchOutcome,
    CancelChoice,
    HeldBatch,
    JobDone,
    Manifest,
    OpenJob,
)
from turnstile.store.port import ListedObject, object_uri

log = logs.get("unordered")


class Applied(StrEnum):
    """What `apply` did with a batch."""

    SUBMITTED = "submitted"
    DUPLICATE = "duplicate"  # its job exists already
    FAILED = "failed"  # refused (its config, the job service): recorded as failed instead


def apply(
    inv: Invocation, batch: Batch, resolved: ResolvedConfig, success_generation: int, attempt: int = 0
) -> Applied:
    """Submit the batch's job. A batch whose config asks it to wait is recorded as failed instead
    (`lineage_refusal`), as is one whose submit is refused."""
    table = batch.table
    refusal = lineage_refusal(inv, batch, resolved)
    if refusal is not None:
        refused(inv, batch, success_generation, refusal)
        return Applied.FAILED
    job_id = unordered_job_id(inv.settings.job_prefix, table, batch.rel, success_generation, attempt)
    if inv.runner.status(job_id) is not None:
        log.info("job already submitted", extra={"table": table.prefix, "rel": batch.rel, "job_id": job_id})
        return Applied.DUPLICATE
    try:
        described = manifest_batch(inv, batch, resolved, success_generation)
    except ConfigError as exc:  # its files cannot be read as its config says
        refused(inv, batch, success_generation, str(exc))
        return Applied.FAILED
    marker = OpenJob(
        job_id=job_id,
        success=batch.success(inv.settings.success_filename),
        success_generation=success_generation,
        rel=batch.rel,
        attempt=attempt,
        submitted_at=inv.clock.now(),
    )
    try:
        inv.store.create(table.open_job(job_id), marker.encode())
    except PreconditionFailed:
        pass  # written before a crash that kept the job from being submitted: submit it now
    manifest = Manifest(
        job_id=job_id,
        bucket=inv.store.bucket,
        ordered=False,
        done_signal=table.done_signal(job_id),
        batches=(described,),
    )
    uri = write_manifest(inv, table.manifest(job_id), manifest)
    try:
        inv.runner.submit(job_id, uri)
    except JobError as exc:
        transient = isinstance(exc, JobDeferred)
        failed(
            inv, table, marker, f"the job could not be submitted: {exc}", transient=transient, config=resolved
        )
        return Applied.FAILED
    log.info("job submitted", extra={"table": table.prefix, "rel": batch.rel, "job_id": job_id})
    return Applied.SUBMITTED


def cancel(inv: Invocation, table: Table, choice: CancelChoice) -> tuple[str, ...]:
    """Cancel the table's open unordered jobs: each marker records the choice first (compare-and-
    swap), so the job's end reads as the operator's, then the runner is asked to cancel it. What a
    job committed stays; its batch, if not committed, waits for `turnstile retry` (BLOCK) or is
    submitted again at once (REQUEUE). Returns the ids of the jobs asked to cancel."""
    cancelled = []
    for info in inv.store.list_entries(table.open_jobs):
        found = inv.store.read(info.name)
        if found is None:
            continue  # ended meanwhile
        marker = OpenJob.decode(found.data, object_uri(inv.store, found.name))
        try:
            inv.store.replace(
                info.name,
                marker.model_copy(update={"cancel": choice}).encode(),
                if_generation=found.generation,
            )
        except PreconditionFailed:
            continue  # its end is being handled: nothing left to cancel
        inv.runner.cancel(marker.job_id)
        cancelled.append(marker.job_id)
    return tuple(cancelled)


def hold(inv: Invocation, batch: Batch, success_generation: int) -> bool:
    """While the table is paused, record the batch instead of submitting its job; False when the
    table is not paused (then the caller submits it)."""
    table = batch.table
    if inv.store.stat(table.pause) is None:
        return False
    name = table.held_batch(batch.rel, success_generation)
    record = HeldBatch(
        success=batch.success(inv.settings.success_filename),
        success_generation=success_generation,
        rel=batch.rel,
        held_at=inv.clock.now(),
    )
    try:
        inv.store.create(name, record.encode())
        fresh = True
    except PreconditionFailed:
        fresh = False  # a duplicate event: held already, and said so then
    if inv.store.stat(table.pause) is None:
        # Resumed meanwhile: the resume's release may have listed the held batches before this one.
        inv.store.remove(name)
        return False
    if fresh:
        _held_alert(table, batch.rel)
    return True


def _held_alert(table: Table, rel: str) -> None:
    log.warning(
        f"{table.uri} is paused: batch {rel!r} is held until turnstile resume {table.uri}",
        extra={"event": "batch_held", "table": table.prefix, "rel": rel},
    )


def release_held(inv: Invocation, table: Table, listed: list[ListedObject] | None = None) -> int:
    """Submit the jobs of the batches held while the table was paused (none while it still is);
    returns how many were submitted. A held batch whose `_SUCCESS` was uploaded again or deleted
    since is let go (a new generation has an event of its own); one whose config no longer resolves
    stays held, reported at every try, until it is fixed. `listed`: a listing of `held/` made
    already (the sweeper's)."""
    held = inv.store.list_entries(table.held) if listed is None else listed
    if not held or inv.store.stat(table.pause) is not None:
        return 0
    submitted = 0
    for info in held:
        found = inv.store.read(info.name)
        if found is None:
            continue  # released by another invocation meanwhile
        record = HeldBatch.decode(found.data, object_uri(inv.store, info.name))
        try:
            live = _live_batch(inv, record.success, record.success_generation)
        except (ConfigError, PathError) as exc:
            log.error(
                f"rejected: held batch {record.rel!r} of {table.uri} cannot be submitted: {exc}; it "
                "stays held until this is fixed, then the next sweep submits it",
                extra={
                    "event": "rejected",
                    "table": table.prefix,
                    "rel": record.rel,
                    "object": object_uri(inv.store, record.success),
                    "error": str(exc),
                },
            )
            continue
        if live is not None:
            submitted += apply(inv, *live, record.success_generation) is not Applied.DUPLICATE
        inv.store.remove(info.name)
    return submitted


def resubmit(inv: Invocation, success: str, generation: int, attempt: int) -> bool:
    """Submit attempt `attempt` of the batch, if its `_SUCCESS` still has that generation (a newer
    upload is a new batch, handled by its own event) and its config resolves (if not, its failure
    record says why, and `turnstile retry` applies it after the fix)."""
    try:
        live = _live_batch(inv, success, generation)
    except (ConfigError, PathError):
        return False
    return live is not None and apply(inv, *live, generation, attempt) is not Applied.DUPLICATE


def _live_batch(inv: Invocation, success: str, generation: int) -> tuple[Batch, ResolvedConfig] | None:
    """The batch and its config when its `_SUCCESS` still has `generation` (None: uploaded again or
    deleted since). Raises ConfigError or PathError when its config no longer resolves."""
    live = inv.store.stat(success)
    if live is None or live.generation != generation:
        return None
    return inv.batch(success)


def ended(inv: Invocation, table: Table, done: JobDone) -> None:
    """Handle an unordered job's end: clear its marker; record and alert a failure."""
    found = inv.store.read(table.open_job(done.job_id))
    if found is None:
        return  # handled already (a duplicate done event, or the watchdog got there first)
    marker = OpenJob.decode(found.data, object_uri(inv.store, found.name))
    if done.succeeded:
        _clear_failures(inv, table, marker.rel, up_to=marker.success_generation)
        inv.store.remove(table.open_job(done.job_id))
        return
    recorded = done.outcomes.get(marker.rel) is BatchOutcome.FAILED
    transient = retries.kind(recorded) is retries.FailureKind.TRANSIENT
    failed(inv, table, marker, done.error or f"job {done.job_id} failed", transient=transient)


def failed(
    inv: Invocation,
    table: Table,
    marker: OpenJob,
    error: str,
    *,
    transient: bool,
    config: ResolvedConfig | None = None,
) -> BatchFailure | None:
    """Record the failure of the job `marker` names, schedule its retry when it is transient and
    retries are left, raise the alert, and clear the marker. Only the handler that claims the marker
    does (`_claim`); None for any other."""
    claimed = _claim(inv, table, marker.job_id)
    if claimed is None:
        return None
    marker, generation = claimed
    load = config.load if config is not None else _load(inv, marker)
    if marker.cancel is not None:  # an operator's cancel: retried at once (requeue) or not at all
        transient = marker.cancel is CancelChoice.REQUEUE
        error = f"cancelled by an operator ({marker.cancel.value}): {error}"
    attempt = marker.attempt + 1
    now = inv.clock.now()
    if not transient:
        when = None
    elif marker.cancel is CancelChoice.REQUEUE:
        when = now  # asked for by an operator: at the next sweep, whatever the attempts so far
    else:
        when = retries.retry_at(attempt, load.job_retries, load.job_retry_backoff_seconds, marker.job_id, now)
    failure = BatchFailure(
        job_id=marker.job_id,
        success=marker.success,
        success_generation=marker.success_generation,
        rel=marker.rel,
        error=error,
        transient=transient,
        attempt=attempt,
        retry_at=when,
        failed_at=now,
    )
    _record(inv, table, failure)
    try:
        inv.store.delete(table.open_job(marker.job_id), if_generation=generation)
    except PreconditionFailed:
        pass  # taken over after our lease: the taker clears it
    return failure


_CLAIM_TRIES = 5


def _claim(inv: Invocation, table: Table, job_id: str) -> tuple[OpenJob, int] | None:
    """Take the handling of a job's failed end: mark its open-job marker ending, compare-and-swap,
    so that of two handlers (a duplicate done event, the watchdog) only one records the failure,
    and one stalled until after the retry applied the batch writes nothing. Returns the marker and
    its claimed generation; None when the end is handled, or being handled, by another. A claim
    older than the lease is taken over: its handler died, as no invocation outlives its timeout."""
    name = table.open_job(job_id)
    for _ in range(_CLAIM_TRIES):
        found = inv.store.read(name)
        if found is None:
            return None
        marker = OpenJob.decode(found.data, object_uri(inv.store, name))
        now = inv.clock.now()
        if marker.ending_at is not None and now - marker.ending_at < inv.lease:
            return None
        claim = marker.model_copy(update={"ending_at": now})
        try:
            return marker, inv.store.replace(name, claim.encode(), if_generation=found.generation)
        except PreconditionFailed:
            continue  # cancelled or claimed meanwhile: read it again
    log.warning(
        f"the end of job {job_id} of {table.uri} could not be claimed after {_CLAIM_TRIES} tries; the "
        "sweeper's watchdog handles it",
        extra={"event": "job_end_unclaimed", "table": table.prefix, "job_id": job_id},
    )
    return None


def _clear_failures(inv: Invocation, table: Table, rel: str, *, up_to: int) -> None:
    """Remove the batch's failure records up to this committed generation: an older generation's
    failure is fixed by the re-upload that committed, and would otherwise alarm for good."""
    folder = table.failure(rel, 0).removesuffix("0.json")
    for info in inv.store.list_entries(folder):
        generation = info.name[len(folder) :].removesuffix(".json")
        if generation.isdigit() and int(generation) <= up_to:
            inv.store.remove(info.name)


def lineage_refusal(inv: Invocation, batch: Batch, resolved: ResolvedConfig) -> str | None:
    """Why the batch of an unordered table cannot honour its config's `depends_on` or `delay`, or
    None: they hold back the batches of ordered tables, which wait in their order; an unordered
    batch that ignored them would be applied before what it waits for."""
    if not resolved.load.lineage.gated:
        return None
    files = ", ".join(object_uri(inv.store, s) for s in resolved.sources if s.endswith("/load.json"))
    success = object_uri(inv.store, batch.success(inv.settings.success_filename))
    return (
        f"{files or 'load.json'} sets depends_on or delay, which only ordered tables honour, and "
        f"{object_uri(inv.store, batch.table.prefix)} is not ordered: either put an ORDERME in its "
        f"_config/ and upload {success} again, or remove those keys"
    )


def refused(inv: Invocation, batch: Batch, success_generation: int, error: str) -> BatchFailure:
    """Record a batch whose job cannot even be built (its `load.json` does not validate) as failed,
    with the alert, so `status` shows it and `turnstile retry` applies it once the config is fixed."""
    table = batch.table
    failure = BatchFailure(
        job_id=unordered_job_id(inv.settings.job_prefix, table, batch.rel, success_generation, 0),
        success=batch.success(inv.settings.success_filename),
        success_generation=success_generation,
        rel=batch.rel,
        error=error,
        transient=False,
        attempt=0,  # no job ran: `retry` submits the first attempt
        retry_at=None,
        failed_at=inv.clock.now(),
    )
    _record(inv, table, failure)
    return failure


def _record(inv: Invocation, table: Table, failure: BatchFailure) -> None:
    """Write the failure record and raise its alert (or announce its retry)."""
    inv.store.write(table.failure(failure.rel, failure.success_generation), failure.encode())
    fields = {
        "table": table.prefix,
        "job_id": failure.job_id,
        "rel": failure.rel,
        "attempt": failure.attempt,
        "error": failure.error,
    }
    if failure.retry_at is not None:
        log.warning(
            f"job {failure.job_id} for batch {failure.rel!r} of {table.uri} failed for a transient reason "
            f"({failure.error}); retried at {failure.retry_at.isoformat()}",
            extra={"event": "job_retry_scheduled", "retry_at": failure.retry_at.isoformat(), **fields},
        )
    else:
        log.error(
            f"batch {failure.rel!r} of {table.uri} failed ({failure.error}); fix the cause, then run: "
            f"turnstile retry {table.uri}/{failure.rel}",
            extra={"event": "batch_failed", "bucket": table.bucket, **fields},
        )


def _load(inv: Invocation, marker: OpenJob) -> LoadConfig:
    """The batch's load config (the defaults when it no longer resolves)."""
    try:
        return inv.batch(marker.success)[1].load
    except (ConfigError, PathError):
        return LoadConfig.model_validate({})
