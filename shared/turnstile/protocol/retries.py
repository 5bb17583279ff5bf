"""When a failed job is retried: pure decisions over what the job left behind.

A failure is TERMINAL when the job reached the batch and recorded why it could not apply it (bad
data, bad SQL, a schema conflict, bad rows over the limit): running it again cannot help. It is
TRANSIENT when the job never got that far (the service refused or lost it, the machine died, it
never started, it was stopped by the watchdog) or was refused for a reason that passes (permission
denied while IAM propagates, quota). Transient failures are retried `job_retries` times with
exponential backoff (tenacity's schedule) and a jitter derived from the job id, so retries of many
tables spread out and a simulated schedule replays identically.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from tenacity import wait_exponential

MAX_BACKOFF_SECONDS = 900


class FailureKind(StrEnum):
    TRANSIENT = "transient"
    TERMINAL = "terminal"


def kind(batch_recorded_failure: bool, *, cancelled_by_operator: bool = False) -> FailureKind:
    """TERMINAL when the job recorded the batch's own failure (or an operator cancelled it)."""
    if batch_recorded_failure or cancelled_by_operator:
        return FailureKind.TERMINAL
    return FailureKind.TRANSIENT


@dataclass(frozen=True)
class _Attempt:
    attempt_number: int  # what tenacity's wait strategies read


def backoff(attempt: int, initial_seconds: int, key: str) -> timedelta:
    """The wait before retry number `attempt` (1 = the first retry): initial * 2^(attempt-1), at
    most 15 minutes, plus up to a quarter more, decided by `key` (the failed job's id)."""
    wait = wait_exponential(multiplier=initial_seconds, max=MAX_BACKOFF_SECONDS)
    base = float(wait(_Attempt(max(attempt, 1))))  # type: ignore[arg-type]
    jitter = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return timedelta(seconds=base * (1 + jitter / 4))


def retry_at(attempt: int, retries: int, initial_seconds: int, key: str, now: datetime) -> datetime | None:
    """When to retry after the `attempt`-th transient failure; None when the retries are used up."""
    if attempt > retries:
        return None
    return now + backoff(attempt, initial_seconds, key)
