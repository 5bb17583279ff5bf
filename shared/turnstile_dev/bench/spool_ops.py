"""What the warm drivers' spool in the bucket costs in storage operations, counted at the
`ObjectStore` port in process, on the in-memory store (GCS's semantics), with the production code:
`WarmRunner` for the functions' side (submit, status) and `driver_serve.serve_driver` for the
driver's.

- **Per job**: a backlog of `jobs` submitted at once, one driver launched for them (the launch is
  recorded, not run) that serves them, DRIVER_SLOTS at once, and leaves, then each job's status
  read once, as the subscriber reads it when the job's done signal arrives. Split by side and by operation.
- **Per idle minute**: a registered driver with nothing queued, polling the spool every
  `poll_seconds` (DRIVER_POLL_SECONDS) until `idle_minutes` have passed on its clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from turnstile.config.settings import Settings
from turnstile.entrypoints.driver_serve import serve_driver
from turnstile.jobs.driver_policy import dataproc_costs
from turnstile.jobs.warm_runner import WarmRunner
from turnstile.state.spooldriver import SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolBounds, SpoolRequest
from turnstile.state.spoolserve import serve
from turnstile.store.memory import MemoryStore
from turnstile.store.recording import RecordingStore

BUCKET = "spool-ops"
# The deployment's defaults: jobs side by side in a driver, drivers at once.
SLOTS: int = Settings.model_fields["driver_slots"].default
MAX_DRIVERS: int = Settings.model_fields["driver_max_count"].default


class _Clock:
    """Moves only when slept; two readings never tell the same time."""

    def __init__(self) -> None:
        self.at = datetime(2026, 6, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.at += timedelta(microseconds=1)
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


class _Launches:
    """Where Dataproc (or the local runner) would start a driver: the launches, recorded."""

    service = "recorded launch"

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None:
        self.launched.append(batch_id)

    def status(self, job_id: str) -> None:
        return None

    def cancel(self, job_id: str) -> None:
        return None


def _succeeded(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
    return Outcome.SUCCEEDED, None


def _delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    return {op: after[op] - before[op] for op in sorted(after) if after[op] - before[op]}


def per_job(jobs: int = 50) -> dict[str, Any]:
    clock = _Clock()
    store = RecordingStore(MemoryStore(BUCKET, clock=clock))
    launches = _Launches()
    runner = WarmRunner(
        launches,
        store,
        spool_bucket=BUCKET,
        prefix="turnstile",
        driver_main_uri="driver.py",
        clock=clock,
        max_drivers=MAX_DRIVERS,
    )
    for index in range(jobs):
        runner.submit(f"job-{index:04d}", f"gs://{BUCKET}/ds/t{index % 5}/_turnstile/jobs/{index}.json")
    submitted = Counter(store.ops)
    costs = dataproc_costs(max_idle_seconds=300, max_lifetime_seconds=3600)
    for driver_id in launches.launched:
        serve_driver(store, clock, driver_id, _succeeded, costs, poll_seconds=2.0, slots=SLOTS)
    served = Counter(store.ops)
    states = [runner.status(f"job-{index:04d}") for index in range(jobs)]
    read = Counter(store.ops)
    return {
        "jobs": jobs,
        "drivers_launched": len(launches.launched),
        "all_succeeded": all(s is not None and s.state.value == "SUCCEEDED" for s in states),
        "per_job": sum(read.values()) / jobs,
        "submit_per_job": sum(submitted.values()) / jobs,
        "driver_per_job": (sum(served.values()) - sum(submitted.values())) / jobs,
        "status_per_job": (sum(read.values()) - sum(served.values())) / jobs,
        "by_operation": {
            "submit": _delta(submitted, Counter()),
            "driver": _delta(served, submitted),
            "status": _delta(read, served),
        },
    }


def per_idle_minute(poll_seconds: float = 2.0, idle_minutes: float = 10.0) -> dict[str, Any]:
    clock = _Clock()
    store = RecordingStore(MemoryStore(BUCKET, clock=clock))
    driver = SpoolDriver(store, clock, "idle-driver", batch="idle-driver", bounds=SpoolBounds())
    started = clock.now()
    before: list[Counter[str]] = []

    def should_leave(idle_since: datetime | None, now: datetime) -> str | None:
        if not before:
            before.append(Counter(store.ops))  # registered: from here on it only waits
        return "measured" if now - started >= timedelta(minutes=idle_minutes) else None

    serve(driver, _succeeded, should_leave, clock, poll_seconds)
    ops = _delta(Counter(store.ops), before[0])
    return {
        "poll_seconds": poll_seconds,
        "minutes": idle_minutes,
        "per_minute": sum(ops.values()) / idle_minutes,
        "by_operation_per_minute": {op: n / idle_minutes for op, n in ops.items()},
    }


def measure() -> dict[str, Any]:
    return {"per_job": per_job(), "idle": per_idle_minute(), "idle_local": per_idle_minute(0.2, 1.0)}


def markdown(r: dict[str, Any]) -> str:
    s = r.get("spool_ops")
    if not s:
        return "Not measured in this run.\n"
    job, idle, local = s["per_job"], s["idle"], s["idle_local"]
    ops = "; ".join(
        f"{side}: " + ", ".join(f"{op} {n / job['jobs']:g}" for op, n in kinds.items())
        for side, kinds in job["by_operation"].items()
    )
    waiting = ", ".join(f"{op} {n:g}" for op, n in idle["by_operation_per_minute"].items())
    when = f"Measured in a separate run on {s['measured_at']}. " if "measured_at" in s else ""
    return (
        f"{when}Counted in process at the `ObjectStore` port with the production code (`WarmRunner`, "
        f"`serve_driver`) on the in-memory store. **{job['per_job']:.2f} operations per job**: a backlog "
        f"of {job['jobs']} jobs submitted at once, served by {job['drivers_launched']} driver that then "
        f"leaves, each job's status read once (all succeeded: {job['all_succeeded']}): the submit "
        f"{job['submit_per_job']:.2f}, the driver {job['driver_per_job']:.2f}, the status read "
        f"{job['status_per_job']:.2f}. By operation per job: {ops}. **{idle['per_minute']:g} operations "
        f"per idle minute** of a driver polling every {idle['poll_seconds']:g} s (DRIVER_POLL_SECONDS, "
        f"the default): {waiting}; every poll lists the requests, and the driver's record (its "
        "heartbeat) is rewritten only once a quarter of the stale bound has passed. At "
        f"{local['poll_seconds']:g} s, as the local stack's spool tests poll: "
        f"{local['per_minute']:g} per idle minute.\n"
    )
