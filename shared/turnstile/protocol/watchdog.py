"""The sweeper's watchdog: asks the runner about the jobs that hold a table or own an unordered
batch past their expected time, and acts on the answer; starts the due retries of unordered batches.

- A RUNNING lock whose job runs past the head batch's `job_timeout_seconds` is cancelled; its end
  (CANCELLED, no record of the batch) is a transient failure the subscriber retries.
- An unordered job's marker (`_turnstile/open/`) older than the function's lease: a job the runner
  does not know is submitted (a crash between marker and submit); one that ended without its done
  signal is handled as ended (a transient failure when nothing says otherwise); one running past
  its timeout is cancelled.
- An unordered failure record (`_turnstile/failures/`) whose retry is due is submitted again under
  the next attempt's job id, unless the table is paused.
- Unordered batches held while the table was paused are submitted once it is not (a lost wake-up
  of `turnstile resume`).
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.config.load_config import LoadConfig
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.paths import Table
from turnstile.protocol import backlog, unordered
from turnstile.protocol.context import Invocation
from turnstile.protocol.state import TableState, read_done_signal
from turnstile.state.records import BatchFailure, LockState, OpenJob
from turnstile.store.port import object_uri

log = logs.get("watchdog")
SHORTEST_TIMEOUT = 60  # seconds: below this no job can have overrun (job_timeout_seconds >= 60)


@dataclass
class Watched:
    cancelled: int = 0
    ended: int = 0
    resubmitted: int = 0
    retried: int = 0
    released: int = 0  # batches held while the table was paused


def watch(state: TableState) -> Watched:
    found = Watched()
    _watch_lock(state, found)
    inv, table = state.inv, state.table
    for info in inv.store.list_entries(table.open_jobs):
        read = inv.store.read(info.name)
        if read is not None:
            _watch_open_job(state, OpenJob.decode(read.data, object_uri(inv.store, info.name)), found)
    if state.operator_pause is not None:
        return found  # no job starts, retries included, until `turnstile resume`
    found.released = unordered.release_held(inv, table, state.held)
    for info in state.failure_records:
        read = inv.store.read(info.name)
        if read is not None:
            _retry_if_due(state, BatchFailure.decode(read.data, object_uri(inv.store, info.name)), found)
    return found


def _watch_lock(state: TableState, found: Watched) -> None:
    held, inv = state.lock, state.inv
    if held.state is not LockState.RUNNING or not held.job_id or not held.covers:
        return
    age = state.age(held.acquired_at)
    if age is None or age < SHORTEST_TIMEOUT:
        return
    pointer = inv.store.read(held.covers[0].pointer)
    timeout = _load(inv, backlog.decode(inv, pointer).success if pointer else None).job_timeout_seconds
    if age > timeout:
        _cancel(inv, state.table, held.job_id, held.covers[0].rel, age=age, found=found)


def _watch_open_job(state: TableState, marker: OpenJob, found: Watched) -> None:
    inv, table = state.inv, state.table
    age = state.age(marker.submitted_at) or 0.0
    if age < inv.lease.total_seconds():
        return  # its submit or its done event may still be on the way
    status = inv.runner.status(marker.job_id)
    if status is None:
        if unordered.resubmit(inv, marker.success, marker.success_generation, marker.attempt):
            found.resubmitted += 1
        return
    if status.state.finished:
        done = read_done_signal(inv, table, marker.job_id)
        if done is not None:
            unordered.ended(inv, table, done)
        else:  # none, or one that does not decode: retried, and the retry finds a commit it made
            detail = (
                status.detail or f"job {marker.job_id} ended {status.state.value} without its done signal"
            )
            unordered.failed(inv, table, marker, detail, transient=True)
        found.ended += 1
        return
    if age > _load(inv, marker.success).job_timeout_seconds:
        _cancel(inv, table, marker.job_id, marker.rel, age=age, found=found)


def _retry_if_due(state: TableState, failure: BatchFailure, found: Watched) -> None:
    if failure.retry_at is None or failure.retry_at > state.now:
        return
    if unordered.resubmit(state.inv, failure.success, failure.success_generation, failure.attempt):
        found.retried += 1


def _cancel(inv: Invocation, table: Table, job_id: str, rel: str, *, age: float, found: Watched) -> None:
    status = inv.runner.status(job_id)
    if status is None or status.state.finished:
        return
    inv.runner.cancel(job_id)
    found.cancelled += 1
    log.error(
        f"job {job_id} for batch {rel!r} of {table.uri} ran {age:.0f} s, past job_timeout_seconds: "
        "cancelled; it is retried as a transient failure",
        extra={"event": "job_timed_out", "table": table.prefix, "job_id": job_id, "rel": rel},
    )


def _load(inv: Invocation, success: str | None) -> LoadConfig:
    if success is not None:
        try:
            return inv.batch(success)[1].load
        except (ConfigError, PathError):
            pass
    return LoadConfig.model_validate({})
