"""`turnstile status`: the running jobs of an unordered table, from their markers.

An unordered batch's job has a marker `<table>/_turnstile/open/<job>.json` from its submit until its
end is handled (by its done signal, or by the sweeper's watchdog once the function's lease has
passed: a job cancelled by `turnstile cancel`, or one that died without its done signal). While one
is there the table is RUNNING, not IDLE: its batch is neither applied nor failed yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from turnstile.core.errors import ConfigError
from turnstile.names.paths import Table
from turnstile.ops import render
from turnstile.protocol.context import Invocation
from turnstile.state.records import OpenJob
from turnstile.store.port import object_uri

SHOWN = 100  # markers listed per table


@dataclass(frozen=True)
class OpenJobView:
    job_id: str
    rel: str
    since: datetime  # when it was submitted
    age_seconds: float  # since then
    attempt: int  # 0: the first; N: the N-th retry (`...-rN`)
    cancel_requested: str | None  # `turnstile cancel`: "block" or "requeue"; None: not asked


def open_jobs(inv: Invocation, table: Table, now: datetime, errors: list[str]) -> tuple[OpenJobView, ...]:
    """The table's open unordered jobs, in job id order: one listing, one read each (the first
    SHOWN). A marker that does not decode is reported in `errors`."""
    found = []
    for info in inv.store.list_entries(table.open_jobs, limit=SHOWN):
        read = inv.store.read(info.name)
        if read is None:
            continue  # its end was handled meanwhile
        try:
            marker = OpenJob.decode(read.data, object_uri(inv.store, info.name))
        except ConfigError as exc:
            errors.append(str(exc))
            continue
        cancel = marker.cancel.value if marker.cancel is not None else None
        age = (now - marker.submitted_at).total_seconds()
        found.append(OpenJobView(marker.job_id, marker.rel, marker.submitted_at, age, marker.attempt, cancel))
    return tuple(found)


def describe(table: str, job: OpenJobView) -> str:
    """The line `status` prints below the table for one open job."""
    rel = repr(job.rel) if job.rel else "(flat)"
    cancel = (
        f"; cancel requested ({job.cancel_requested}): the sweeper's watchdog settles it once the "
        "function's lease has passed"
        if job.cancel_requested
        else ""
    )
    return (
        f"{table}: job {job.job_id} for batch {rel} running since {render.age(job.age_seconds)} ago{cancel}"
    )
