"""JobRunner with warm drivers (DRIVER=warm), on Dataproc Serverless or EMR Serverless: a job is a
request in the bucket's spool (`turnstile.state.spoolsubmit`), served by a long-lived driver (a
Dataproc batch, or an EMR job run, of `turnstile.entrypoints.spool_driver`) that runs many jobs in
one Spark session. The service is the `Batches` passed in; the spool protocol is the same on both.

`submit` queues the request, then starts a driver when no driver takes requests: the next
driver is announced and the deployment's driver sequence moved on to it by compare-and-swap
(`spoollaunch.claim_launch`), so of submitters that race exactly one launches, under a batch id (an
EMR job run's name) derived from the deployment and that number. `status` reads the job's records
in the spool; a job whose driver's batch ended (FAILED, CANCELLED, or gone) without recording its
end is FAILED, a transient failure the protocol retries.
When drivers take requests but requests waited longer than a driver's start-up, `submit` starts
another, up to DRIVER_MAX_COUNT (`driver_policy.scale_out`). `cancel` withdraws a queued request;
a job a driver already runs is asked to stop at its next batch boundary. Jobs the spool does not
know (submitted one batch per job, before the switch to DRIVER=warm) are read and cancelled as
batches.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import SettingsError
from turnstile.jobs.driver_policy import DriverView, QueueView, dataproc_costs, scale_out
from turnstile.jobs.port import JobState, JobStatus
from turnstile.names import driverspool
from turnstile.names.paths import INTERNAL
from turnstile.state import spoollaunch, spoolsubmit
from turnstile.state.spoolreap import drivers, read_driver, reap
from turnstile.state.spoolrecords import DriverRecord, DriverState, Outcome, SpoolBounds, taking
from turnstile.store.port import ObjectStore

DRIVER_LABEL = "turnstile-driver"
"""Label put on every warm driver batch (value `true`), beside `turnstile-job`."""

_BATCH_ID = re.compile(r"[a-z][a-z0-9-]{2,61}[a-z0-9]")

log = logs.get("warm_runner")


def driver_batch_id(prefix: str, spool_bucket: str, number: int) -> str:
    """The batch id (and spool driver id) of the deployment's driver `number`: JOB_PREFIX, `drv`,
    8 hex digits of the spool's bucket (two deployments in one project never share an id) and the
    number. Within Dataproc's rule: 4-63 lowercase letters, digits and hyphens, starting with a
    letter and not ending with a hyphen."""
    digest = hashlib.sha256(spool_bucket.encode()).hexdigest()[:8]
    batch_id = f"{prefix}-drv-{digest}-{number}"
    if not _BATCH_ID.fullmatch(batch_id):
        raise SettingsError(
            f"JOB_PREFIX {prefix!r} makes the driver batch id {batch_id!r}, which Dataproc refuses: "
            "use 1-20 lowercase letters, digits and hyphens, starting with a letter"
        )
    return batch_id


def table_of(manifest_uri: str) -> str:
    """The table prefix a job's manifest sits under (`gs://b/ds/t/_turnstile/jobs/x.json`: `ds/t`)."""
    path = manifest_uri.split("://", 1)[-1].partition("/")[2]
    table, found, _ = path.partition(f"/{INTERNAL}/")
    return table if found else path


class Batches(Protocol):
    """What the warm runner needs of the service that runs Spark applications: `DataprocRunner` on
    Dataproc Serverless, `EmrRunner` on EMR Serverless, `LocalRunner` (a spark-submit per driver)
    on the local stack."""

    @property
    def service(self) -> str:
        """What a driver is there, for messages: "Dataproc batch", "EMR Serverless job run"."""
        ...

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None: ...

    def status(self, job_id: str) -> JobStatus | None: ...

    def cancel(self, job_id: str) -> None: ...


class WarmRunner:
    """Warm drivers behind the `JobRunner` port."""

    def __init__(
        self,
        batches: Batches,
        spool: ObjectStore,
        *,
        spool_bucket: str,
        prefix: str,
        driver_main_uri: str,
        driver_args: tuple[str, ...] = (),
        clock: Clock | None = None,
        bounds: SpoolBounds | None = None,
        start_timeout: timedelta = timedelta(seconds=600),
        max_drivers: int = 1,
    ) -> None:
        self._batches = batches
        self._spool = spool
        self._spool_bucket = spool_bucket
        self._prefix = prefix
        self._driver_main_uri = driver_main_uri
        self._driver_args = driver_args
        self._clock = clock or SystemClock()
        self._bounds = bounds or SpoolBounds()
        self._start_timeout = start_timeout
        # Only the start-up and the bound count for scale-out; the idle bounds are the drivers' own.
        self._costs = dataproc_costs(max_idle_seconds=0, max_lifetime_seconds=1e9, max_drivers=max_drivers)

    @classmethod
    def on(
        cls,
        batches: Batches,
        settings: Settings,
        store: ObjectStore,
        driver_main: str,
        extra_args: tuple[str, ...] = (),
        *,
        slots: int | None = None,
        poll_seconds: float | None = None,
    ) -> WarmRunner:
        """The runner whose drivers `batches` launches from `driver_main`, with the deployment's
        bounds (`slots` jobs at once and a poll every `poll_seconds`: DRIVER_SLOTS and
        DRIVER_POLL_SECONDS unless given) and its spool in `store`."""
        args = (
            "--max-idle-seconds",
            str(settings.driver_max_idle_seconds),
            "--max-lifetime-seconds",
            str(settings.driver_max_lifetime_seconds),
            "--poll-seconds",
            str(poll_seconds or settings.driver_poll_seconds),
            "--slots",
            str(slots or settings.driver_slots),
            *extra_args,
        )
        return cls(
            batches,
            store,
            spool_bucket=spool_bucket(store),
            prefix=settings.job_prefix,
            driver_main_uri=driver_main,
            driver_args=args,
            start_timeout=timedelta(seconds=settings.driver_start_timeout_seconds),
            max_drivers=settings.driver_max_count,
        )

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        queued = spoolsubmit.submit(
            self._spool,
            self._clock,
            job_id,
            table_of(manifest_uri),
            {"manifest": manifest_uri},
            bounds=self._bounds,
            more_queued=more_queued,
        )

        def needed() -> bool:
            return spoolsubmit.driver_needed(self._spool, self._clock, self._bounds)

        if queued.driver_needed or (self._ended_drivers() and needed()):
            self.start_driver(needed)
        elif self._costs.max_drivers > 1 and self._scale_out_wanted(queued.drivers):
            self.start_driver(lambda: self._scale_out_wanted(reap(self._spool, self._clock, self._bounds)))

    def _scale_out_wanted(self, records: Sequence[DriverRecord]) -> bool:
        """Whether another driver should start beside those taking requests (`driver_policy.
        scale_out`): requests waited longer than a start-up, up to DRIVER_MAX_COUNT drivers. One
        listing of the queue, read only while every driver up has all its slots busy."""
        now = self._clock.now()
        live = [r for r in records if taking(r, now, self._bounds)]
        if not live or len(live) >= self._costs.max_drivers:
            return False  # none: a submit starts the first; at the bound: none more
        if any(r.state is DriverState.STARTING or len(r.serving) < r.slots for r in live):
            return False  # a driver starting, or one with a slot free, takes the queue itself
        count, oldest = spoolsubmit.waiting(self._spool, records)
        queue = QueueView(count, None if oldest is None else oldest.timestamp())
        views = [
            DriverView(
                started_at=r.started_at.timestamp(),
                idle_since=None if r.serving or r.idle_since is None else r.idle_since.timestamp(),
            )
            for r in live
        ]
        if scale_out(queue, views, self._costs, now.timestamp()) == 0:
            return False
        log.info(
            f"{count} warm requests wait, the oldest since {oldest}: a driver starts beside {len(live)}",
            extra={"event": "driver_scale_out", "waiting": count, "drivers": len(live)},
        )
        return True

    def start_driver(self, still_needed: Callable[[], bool]) -> str | None:
        """Launch the next driver batch if `still_needed()`, read after the driver sequence, says no
        driver takes requests; its id, or None when none is needed or another submitter launches."""
        batch_id = spoollaunch.claim_launch(
            self._spool,
            self._clock,
            self._bounds,
            still_needed,
            lambda number: driver_batch_id(self._prefix, self._spool_bucket, number),
        )
        if batch_id is None:
            return None
        args = ["--spool-bucket", self._spool_bucket, "--driver-id", batch_id, *self._driver_args]
        try:
            self._batches.launch(batch_id, self._driver_main_uri, args, {DRIVER_LABEL: "true"})
        except Exception as exc:
            spoollaunch.withdraw_announcement(self._spool, batch_id)  # the next submit launches again
            # ERROR: while no driver can start, no warm job runs (quota, permission, a bad image).
            log.error(
                f"warm driver {self._batches.service} {batch_id} could not be created ({exc}); the job's "
                "submit fails as a refused submit does (retried when transient) and the next submit "
                "launches again",
                extra={"event": "driver_launch_failed", "batch": batch_id, "error": str(exc)},
            )
            raise
        return batch_id

    def status(self, job_id: str) -> JobStatus | None:
        view = spoolsubmit.job_status(self._spool, self._clock, job_id, self._bounds)
        if view.state is spoolsubmit.JobState.UNKNOWN:
            return self._batches.status(job_id)  # a batch of its own, from before DRIVER=warm
        if view.state is spoolsubmit.JobState.QUEUED:
            failed = self._overdue(job_id)
            if failed is not None:
                return failed

            def needed() -> bool:
                return spoolsubmit.driver_needed_for(self._spool, self._clock, job_id, self._bounds)

            if needed() or (self._ended_drivers() and needed()):
                self.start_driver(needed)
            return JobStatus(job_id, JobState.PENDING)
        if view.state is not spoolsubmit.JobState.FINISHED and self._driver_ended(view.driver_id):
            view = spoolsubmit.job_status(self._spool, self._clock, job_id, self._bounds)
        return _status(job_id, view)

    def _overdue(self, job_id: str) -> JobStatus | None:
        """The job FAILED (transient) when it waited past the start timeout with no driver running:
        withdrawn, so that no driver runs it later, with the ERROR the launch alert counts."""
        why = spoolsubmit.start_overdue(self._spool, self._clock, job_id, self._bounds, self._start_timeout)
        if why is None or not spoolsubmit.withdraw(self._spool, self._clock, job_id, reason=why).withdrawn:
            return None  # a driver took it meanwhile: it runs
        log.error(
            f"warm job {job_id} gave up waiting: {why}; it fails as a transient failure, which the "
            "protocol retries with backoff",
            extra={"event": "driver_launch_failed", "job_id": job_id, "error": why},
        )
        return JobStatus(job_id, JobState.FAILED, f"{why} (a transient failure)")

    def _ended_drivers(self) -> bool:
        """Declare dead every registered driver whose batch ended without leaving (its heartbeat
        would otherwise keep it "taking requests" for up to the stale bound); whether there was one.
        An announced driver is left alone: its batch may not be created yet."""
        ended = False
        for driver in drivers(self._spool):
            if driver.record.state is DriverState.RUNNING:
                ended = self._driver_ended(driver.record.driver_id) or ended
        return ended

    def _driver_ended(self, driver_id: str | None) -> bool:
        """Whether the batch of the driver that took the job has ended although the driver did not
        leave: then it is declared dead, and the job it ran reported FAILED_TRANSIENT."""
        record = None if driver_id is None else read_driver(self._spool, driver_id)
        if driver_id is None or record is None:
            return False
        batch = self._batches.status(record.batch)
        if batch is not None and not batch.state.finished:
            return False
        how = "is gone" if batch is None else f"ended {batch.state.value}: {batch.detail or 'no detail'}"
        why = f"its {self._batches.service} {record.batch} {how}"
        spoollaunch.declare_dead(self._spool, self._clock, driver_id, why, self._bounds)
        return True

    def cancel(self, job_id: str) -> None:
        """Withdraw the job if no driver took it yet; a job a driver took is asked to stop at its
        next batch boundary (what it committed stays committed)."""
        withdrawal = spoolsubmit.withdraw(self._spool, self._clock, job_id)
        if withdrawal.withdrawn or withdrawal.end is not None:
            return
        if withdrawal.driver_id is not None:
            spoolsubmit.request_stop(self._spool, self._clock, job_id)
            log.info(
                f"warm job {job_id} runs in driver {withdrawal.driver_id}: asked to stop at its next batch",
                extra={"event": "job_stop_requested", "job_id": job_id, "driver": withdrawal.driver_id},
            )
            return
        if self._spool.stat(driverspool.submitted_name(job_id)) is None:
            self._batches.cancel(job_id)  # a batch of its own, from before DRIVER=warm


def _status(job_id: str, view: spoolsubmit.JobView) -> JobStatus:
    if view.state is spoolsubmit.JobState.RUNNING:
        return JobStatus(job_id, JobState.RUNNING)
    if view.state is not spoolsubmit.JobState.FINISHED or view.end is None:
        return JobStatus(job_id, JobState.PENDING)  # claimed: about to start
    end = view.end
    if end.outcome is Outcome.SUCCEEDED:
        return JobStatus(job_id, JobState.SUCCEEDED)
    if end.outcome is Outcome.WITHDRAWN:
        return JobStatus(job_id, JobState.CANCELLED, "cancelled: withdrawn before any warm driver took it")
    if end.outcome is Outcome.CANCELLED:
        return JobStatus(job_id, JobState.CANCELLED, end.error or "cancelled: stopped at a batch boundary")
    where = f" (driver {end.driver_id})" if end.driver_id else ""
    if end.outcome is Outcome.FAILED_TRANSIENT:
        return JobStatus(
            job_id, JobState.FAILED, f"the job did not finish{where}: {end.error} (a transient failure)"
        )
    return JobStatus(job_id, JobState.FAILED, f"{end.error or 'the job failed'}{where}")


def driver_main(settings: Settings, scheme: str) -> str:
    """DRIVER_MAIN_URI, the staged driver's main file, which DRIVER=warm needs in the cloud's storage."""
    uri = settings.driver_main_uri
    if not uri:
        raise SettingsError(
            "DRIVER_MAIN_URI is not set; DRIVER=warm needs the staged driver's main file "
            "(job/driver.py of the build, uploaded beside JOB_MAIN_URI), or set DRIVER=per_job"
        )
    if not uri.startswith(f"{scheme}://"):
        raise SettingsError(
            f"DRIVER_MAIN_URI={uri!r}: the driver's main file must be staged at a {scheme}:// URI"
        )
    return uri


def spool_bucket(store: ObjectStore) -> str:
    """The bucket that holds the spool: the state bucket when there is one, else the data bucket."""
    placed = getattr(store, "bucket_of", None)
    return str(placed(driverspool.SEQUENCE)) if placed is not None else store.bucket
