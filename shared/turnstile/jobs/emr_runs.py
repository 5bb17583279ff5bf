"""The EMR runner's record of each job's run, kept in the bucket: what makes a lookup cheap.

EMR Serverless names runs but cannot find one by name: `ListJobRuns` filters by creation time and
state only. Listing the application's whole history on every lookup costs a call per 50 runs (an
application shared by many tables starts thousands a month), so the runner records, per job id,
when it submitted the job and the run id `StartJobRun` answered:

    _turnstile/emr-runs/<job id>.json   {"application_id", "submitted_at", "run_id"}

A lookup reads the record: with a run id it is one `GetJobRun`; without one (a submit that crashed
before recording it, or is still under way) it lists only the runs created since `submitted_at`
(less `CLOCK_SKEW`). A job without a record was never submitted by a runner that keeps records:
only its active runs are listed (a run started before records existed). The record is written
before `StartJobRun`, so no run of this runner exists without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from turnstile.core.errors import PreconditionFailed
from turnstile.store.port import ObjectStore, StoredObject

RUNS_FOLDER = "_turnstile/emr-runs/"
"""Bucket-level, like nothing else turnstile keeps: a job id names no table. Reserved `_` folders
are never taken for datasets or tables."""

CLOCK_SKEW = timedelta(minutes=5)
"""How much earlier than the submitter's clock EMR may stamp a run's `createdAt`."""


@dataclass(frozen=True)
class RunRecord:
    """When a job was submitted to an application, and the run id once known."""

    application_id: str
    submitted_at: datetime
    run_id: str | None = None
    generation: int = 0  # of the record object it was read from or written as

    def encode(self) -> bytes:
        body = {"application_id": self.application_id, "submitted_at": self.submitted_at.isoformat()}
        return json.dumps(body | {"run_id": self.run_id}, sort_keys=True).encode()

    @classmethod
    def decode(cls, found: StoredObject) -> RunRecord | None:
        """The record an object holds; None when it holds none (so the lookup falls back)."""
        try:
            body = json.loads(found.data)
            run_id = body.get("run_id")
            return cls(
                str(body["application_id"]),
                datetime.fromisoformat(str(body["submitted_at"])),
                str(run_id) if run_id else None,
                found.generation,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    @property
    def listed_since(self) -> datetime:
        """The earliest `createdAt` a run of this submission can carry."""
        return self.submitted_at - CLOCK_SKEW


class RunRecords:
    """The records of one application's runs in one bucket."""

    def __init__(self, store: ObjectStore, application_id: str) -> None:
        self._store = store
        self._application_id = application_id

    @staticmethod
    def name(job_id: str) -> str:
        return f"{RUNS_FOLDER}{job_id}.json"

    def get(self, job_id: str) -> RunRecord | None:
        """The job's record for this application, or None."""
        found = self._store.read(self.name(job_id))
        return None if found is None else self._ours(RunRecord.decode(found))

    def _ours(self, record: RunRecord | None) -> RunRecord | None:
        # A record of another application (EMR_APPLICATION_ID changed) names runs this one lacks.
        return record if record is not None and record.application_id == self._application_id else None

    def begin(self, job_id: str, now: datetime) -> tuple[RunRecord, bool]:
        """Record that the job is being submitted now, unless a submission is recorded already; the
        record, and whether it is this one's."""
        record = RunRecord(self._application_id, now)
        try:
            return replace(record, generation=self._store.create(self.name(job_id), record.encode())), True
        except PreconditionFailed as exc:
            earlier = self._ours(RunRecord.decode(exc.found)) if exc.found is not None else None
            if earlier is not None:
                return earlier, False  # a concurrent or earlier submit of the same job
        return replace(record, generation=self._store.write(self.name(job_id), record.encode())), True

    def started(self, job_id: str, record: RunRecord, run_id: str) -> None:
        """Add the run id to the record; a record changed since means another submit recorded its run."""
        try:
            self._store.replace(
                self.name(job_id), replace(record, run_id=run_id).encode(), if_generation=record.generation
            )
        except PreconditionFailed:
            pass

    def forget(self, job_id: str, record: RunRecord) -> None:
        """Drop the record of a submission the service refused, unless it changed since."""
        try:
            self._store.delete(self.name(job_id), if_generation=record.generation)
        except PreconditionFailed:
            pass
