"""The JobRunner port: submit a job under a deterministic id, read its state, cancel it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class JobState(StrEnum):
    """Dataproc's batch states; every runner maps onto these."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (JobState.CANCELLED, JobState.SUCCEEDED, JobState.FAILED)


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: JobState
    detail: str | None = None  # the runner's error message for a failed job


class JobRunner(Protocol):
    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        """Start the job unless a job with this id exists (then attach to it: a no-op).
        `more_queued`: more batches of the table wait behind this job, so its successor is
        submitted as soon as it commits (a warm driver waits for it rather than leave).

        Raises `JobServiceUnavailable` (transient) or `JobError` (terminal)."""

    def status(self, job_id: str) -> JobStatus | None:
        """The job's state, or None when no job has this id."""

    def cancel(self, job_id: str) -> None:
        """Ask the job to stop; a finished or unknown job is left as it is."""
