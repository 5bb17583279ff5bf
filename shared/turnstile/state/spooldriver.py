"""A warm driver's side of the spool in the bucket: register, heartbeat, claim the oldest request,
record a job's start and end, leave.

Every write of the driver's own record is a compare-and-swap from the generation it last wrote, so
once a repairer declared it dead (or another start of its id took the record) its next write fails
(`Fenced`) and it takes nothing more. It names each request it is about to claim in its record
before claiming it (`serving`: the jobs it runs side by side), so a repairer that finds it dead
knows which jobs to report.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state.records import new_nonce
from turnstile.state.spoolreap import (
    decoded_driver,
    decoded_request,
    discard,
    orphan,
    reap,
    report,
    settle_request,
    transient,
)
from turnstile.state.spoolrecords import (
    DriverRecord,
    DriverState,
    JobFinished,
    JobStarted,
    Outcome,
    RejectedRequest,
    RequestState,
    SpoolBounds,
    SpoolRequest,
    taking,
)
from turnstile.store.port import ObjectStore, StoredObject

log = logs.get("spool")


def started_by(found: StoredObject) -> str | None:
    """The driver instance a start record names; None when it is unreadable."""
    try:
        return JobStarted.decode(found.data, found.name).instance
    except ConfigError:
        return None


class Fenced(Exception):
    """The driver's record was changed by someone else: it was declared dead, or another start of
    the same driver id holds it. The driver must take no more requests."""


@dataclass(frozen=True)
class Claimed:
    name: str
    generation: int
    request: SpoolRequest


class SpoolDriver:
    def __init__(
        self,
        store: ObjectStore,
        clock: Clock,
        driver_id: str,
        *,
        batch: str,
        bounds: SpoolBounds,
        instance: str | None = None,
        mutex: AbstractContextManager[object] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.driver_id = driver_id
        self.batch = batch
        self.bounds = bounds
        self.instance = instance or uuid.uuid4().hex
        self.name = names.driver_name(driver_id)
        self._record: DriverRecord | None = None
        self._generation = 0
        self._mutex = mutex or threading.Lock()  # the serving loop and its jobs' threads write the record
        self._listed: deque[str] = deque()  # requests of the last listing not tried yet
        # Drivers taking requests that started before this one, when it registered: 0 for the
        # oldest. Extra drivers (scale-out) leave first when idle (`driver_policy.DriverView.rank`).
        self.rank = 0

    @property
    def record(self) -> DriverRecord | None:
        return self._record

    def register(self, slots: int = 1) -> bool:
        """Take this driver's record (it runs `slots` jobs at once): create it, or move the STARTING
        record its launcher announced to RUNNING. False when another start of the same id holds
        it, or the id ended: leave."""
        now = self.clock.now()
        mine = DriverRecord(
            driver_id=self.driver_id,
            batch=self.batch,
            state=DriverState.RUNNING,
            started_at=now,
            heartbeat_at=now,
            instance=self.instance,
            idle_since=now,
            slots=slots,
        )
        found = self.store.read(self.name)
        current = None if found is None else decoded_driver(found)
        try:
            if found is None:
                self._generation = self.store.create(self.name, mine.encode())
            elif current is not None and current.instance == self.instance:
                mine, self._generation = current, found.generation  # an earlier attempt landed
            elif current is not None and current.state is DriverState.STARTING:
                mine = mine.model_copy(update={"batch": current.batch or self.batch})
                self._generation = self.store.replace(
                    self.name, mine.encode(), if_generation=found.generation
                )
            else:
                return False
        except PreconditionFailed as exc:
            again = None if exc.found is None else decoded_driver(exc.found)
            if exc.found is None or again is None or again.instance != self.instance:
                return False
            mine, self._generation = again, exc.found.generation
        self._record = mine
        # Predecessors that died: their jobs are reported. Those alive rank this one.
        others = reap(self.store, self.clock, self.bounds)
        self.rank = sum(
            1
            for other in others
            if other.driver_id != self.driver_id
            and taking(other, now, self.bounds)
            and other.started_at < mine.started_at
        )
        return True

    def _write(
        self, *, serves: str | None = None, served: str | None = None, ran: bool = False, **update: object
    ) -> None:
        """Compare-and-swap the record from the generation this driver last wrote, with a fresh
        heartbeat: request `serves` named among those it serves, `served` no longer (idle once it
        serves none; one more job served when it `ran`). A record removed by hand is created again;
        one changed by another: `Fenced`."""
        with self._mutex:
            if self._record is None:
                raise Fenced(f"driver {self.driver_id} is not registered")
            current, now = self._record, self.clock.now()
            serving = tuple(name for name in current.serving if name != served)
            if serves is not None and serves not in serving:
                serving, update = (*serving, serves), {"idle_since": None, **update}
            elif served is not None and not serving:
                update = {"idle_since": now, **update}
            if ran:
                update = {"jobs_served": current.jobs_served + 1, **update}
            record = current.model_copy(
                update={"serving": serving, **update, "heartbeat_at": now, "nonce": new_nonce()}
            )
            try:
                self._generation = self.store.replace(
                    self.name, record.encode(), if_generation=self._generation
                )
            except PreconditionFailed as exc:
                if exc.found is not None:
                    theirs = decoded_driver(exc.found)
                    state = "unreadable" if theirs is None else f"{theirs.state.value} ({theirs.reason})"
                    raise Fenced(f"driver {self.driver_id}'s record was changed by another: {state}") from exc
                try:
                    self._generation = self.store.create(self.name, record.encode())
                except PreconditionFailed as again:
                    raise Fenced(f"driver {self.driver_id}'s record was re-created by another") from again
            self._record = record

    def heartbeat(self, *, unless_within: timedelta | None = None) -> None:
        """Write the record with a fresh heartbeat; with `unless_within`, only when the last write
        is older than that (an idle driver polls far more often than its record goes stale)."""
        record = self._record
        if unless_within is None or record is None or self.clock.now() - record.heartbeat_at >= unless_within:
            self._write()

    def take(self) -> Claimed | None:
        """Claim the oldest queued request; None when a listing made now finds none. The rest of a
        listing is tried before the queue is listed again: one listing serves a backlog."""
        listed_now = False
        while True:
            if not self._listed:
                if listed_now:
                    return None
                self._listed.extend(info.name for info in self.store.list_objects(names.REQUESTS))
                listed_now = True
                continue
            claimed = self.claim(self._listed.popleft())
            if claimed is not None:
                return claimed

    def claim(self, name: str) -> Claimed | None:
        """Claim this request if it is still queued: name it in the driver's record, then
        compare-and-swap it QUEUED -> CLAIMED from the generation read."""
        found = self.store.read(name)
        if found is None:
            return None
        request = decoded_request(found)
        if request is None:
            self._reject(found)
            return None
        if request.state in (RequestState.WITHDRAWN, RequestState.LOST):
            settle_request(self.store, self.clock, found, request, "withdrawn")
            return None
        if request.state is RequestState.CLAIMED:
            orphan(self.store, self.clock, found, request, self.bounds)
            return None
        self._write(serves=name)
        claimed = request.model_copy(
            update={
                "state": RequestState.CLAIMED,
                "driver_id": self.driver_id,
                "instance": self.instance,
                "claimed_at": self.clock.now(),
                "nonce": new_nonce(),
            }
        )
        try:
            generation = self.store.replace(name, claimed.encode(), if_generation=found.generation)
        except PreconditionFailed as exc:
            again = None if exc.found is None else decoded_request(exc.found)
            if exc.found is None or again is None or again.nonce != claimed.nonce:
                self._write(served=name)
                return None  # withdrawn, or claimed by another driver
            generation = exc.found.generation  # this claim landed on an earlier attempt
        return Claimed(name, generation, claimed)

    def _reject(self, found: StoredObject) -> None:
        """A request object nobody can read: recorded as failed under its name, then removed."""
        error = f"{found.name} does not hold a turnstile spool request; it was written by something else"
        # A warning: the job it stood for (if its name says which) is reported FAILED, and the
        # table's own `batch_failed` alert is what calls someone.
        log.warning(error, extra={"event": "spool_request_rejected", "request": found.name})
        rejected = RejectedRequest(
            request=found.name, error=error, driver_id=self.driver_id, rejected_at=self.clock.now()
        )
        try:
            self.store.create(names.rejected_name(found.name), rejected.encode())
        except PreconditionFailed:
            pass  # another driver rejected it first
        job = names.job_of(found.name)
        if job is not None:
            end = JobFinished(
                job_id=job,
                outcome=Outcome.FAILED,
                driver_id=self.driver_id,
                error=error,
                finished_at=self.clock.now(),
            )
            report(self.store, end)
        discard(self.store, found.name, found.generation)

    def start(self, claimed: Claimed) -> bool:
        """Record the job's start (created if absent: one driver ever runs a job). False when the
        job's end is recorded already (it was reported lost), or, with the job reported
        FAILED_TRANSIENT, when another driver started it before (a request re-created by hand after
        its first claim): it is not run twice."""
        job = claimed.request.job_id
        if self.store.stat(names.finished_name(job)) is not None:
            # Reported lost while its submit was still creating the request: it must not run now.
            discard(self.store, claimed.name, claimed.generation)
            self._write(served=claimed.name)
            return False
        started = JobStarted(
            job_id=job,
            driver_id=self.driver_id,
            instance=self.instance,
            request=claimed.name,
            started_at=self.clock.now(),
        )
        try:
            self.store.create(names.started_name(job), started.encode())
        except PreconditionFailed as exc:
            if exc.found is not None and started_by(exc.found) == self.instance:
                return True
            why = f"job {job} was started before by another driver; it is not run twice"
            report(self.store, transient(self.clock, job, self.driver_id, why))
            discard(self.store, claimed.name, claimed.generation)
            self._write(served=claimed.name)
            return False
        return True

    def finish(self, claimed: Claimed, outcome: Outcome, error: str | None = None) -> JobFinished:
        """Record the job's end (the first record stands: a repairer that declared this driver dead
        may have reported it already), remove its request, count it. Raises `Fenced` after that
        when this driver was declared dead meanwhile."""
        end = JobFinished(
            job_id=claimed.request.job_id,
            outcome=outcome,
            driver_id=self.driver_id,
            error=error,
            finished_at=self.clock.now(),
        )
        standing = report(self.store, end)
        if standing != end:
            log.warning(
                f"spool job {end.job_id} ended {outcome.value}, reported {standing.outcome.value} before",
                extra={"event": "spool_end_superseded", "job_id": end.job_id, "driver": self.driver_id},
            )
        discard(self.store, claimed.name, claimed.generation)
        self._write(served=claimed.name, ran=True)
        return standing

    def stop_asked(self, job_id: str) -> bool:
        """Whether a cancel asked the running job `job_id` to stop (`jobs/<job>/stop.json`)."""
        return self.store.stat(names.stop_name(job_id)) is not None

    def leave(self, reason: str) -> list[str]:
        """Say LEAVING, then list the queue: the requests this driver still serves (a request queued
        after that listing is seen by its submitter, which reads LEAVING and starts a driver)."""
        self._write(state=DriverState.LEAVING, reason=reason, leaving_at=self.clock.now())
        return [info.name for info in self.store.list_objects(names.REQUESTS)]

    def gone(self) -> None:
        self._write(state=DriverState.GONE, serving=())
