"""What an operator command works with: an `Invocation` like a function's, and quiet protocol logs.

The protocol code takes an `Invocation` (store, job runner, settings, clock); the CLI builds one
per object it acts on, as a function does per event. Commands that never submit a job get a runner
that refuses to; `backfill` gets one built on first use, whose construction failing is a transient
error, so a claim taken for the event is given back rather than marked done.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from turnstile.config.settings import Settings
from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import JobServiceUnavailable, TurnstileError
from turnstile.core.logs import LOGGER_NAME
from turnstile.jobs.port import JobRunner, JobStatus
from turnstile.protocol.context import Invocation
from turnstile.store.port import ObjectStore


class NoRunner:
    """For commands that only move state objects: any job call is a bug, reported as such."""

    def _refuse(self, job_id: str) -> JobServiceUnavailable:
        return JobServiceUnavailable(f"{job_id}: this command does not run jobs")

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        raise self._refuse(job_id)

    def status(self, job_id: str) -> JobStatus | None:
        raise self._refuse(job_id)

    def cancel(self, job_id: str) -> None:
        raise self._refuse(job_id)


class LazyRunner:
    """The runner the settings name, built at its first use (building the local one may compile
    jars; the Dataproc one needs JOB_MAIN_URI and a project). When it cannot be built, every call
    raises `JobServiceUnavailable`: transient, so the caller's claim is released, not marked done."""

    def __init__(self, build: Callable[[], JobRunner]) -> None:
        self._build = build
        self._runner: JobRunner | None = None
        self._error: str | None = None

    def _get(self) -> JobRunner:
        if self._runner is None:
            if self._error is None:
                try:
                    self._runner = self._build()
                    return self._runner
                except TurnstileError as exc:
                    self._error = str(exc)
            raise JobServiceUnavailable(f"cannot submit jobs from this machine: {self._error}")
        return self._runner

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self._get().submit(job_id, manifest_uri, more_queued=more_queued)

    def status(self, job_id: str) -> JobStatus | None:
        return self._get().status(job_id)

    def cancel(self, job_id: str) -> None:
        self._get().cancel(job_id)


def invocation(
    store: ObjectStore, settings: Settings, runner: JobRunner | None = None, clock: Clock | None = None
) -> Invocation:
    clock = clock or SystemClock()
    return Invocation(store, runner or NoRunner(), settings, clock, f"cli-{uuid.uuid4().hex}", clock.now())


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured_logs() -> Iterator[list[logging.LogRecord]]:
    """Collect the protocol's log records instead of printing JSON lines at the operator; the
    logger's handlers, level and propagation are restored afterwards."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    collect = _Collect()
    logger.handlers = [collect]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield collect.records
    finally:
        logger.handlers, level, logger.propagate = saved[0], saved[1], saved[2]
        logger.setLevel(level)
