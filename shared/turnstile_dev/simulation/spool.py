"""The warm drivers' spool in the bucket (`turnstile.state.spool*`), simulated.

Submitters queue jobs and start a driver when told none takes requests, numbered by the driver
sequence (`spoollaunch.claim_launch`: of submitters that race, one launches); drivers serve, go idle and
leave, pass their lifetime, crash, stall past the stale bound (and are declared dead while they
still run), start twice under one id, are announced and never launched, or start beside a running
one (scale-out); people withdraw queued
jobs and remove spool objects by hand; the runners poll each job's status (which reports jobs
whose driver died, and start a driver when none takes requests and no leaving one listed the job)
and submit again now and then. Half the seeds keep the spool in a state bucket.

Drivers run jobs side by side (`SpoolPlan.slots`), each a task of the loop; a crash of any task
of a driver is its process's death (`slots.SimSlots`).

Invariants: every job not withdrawn ran once or was reported failed, none lost (each ends with one
end record, and the queue ends empty); no job runs twice; a withdrawn job never ran, and one whose
withdraw was told "a driver took it" was not recorded withdrawn; a garbage request is recorded
rejected; and once faults stop, a job is taken within a start-up and a poll of its submit, without
waiting for a runner's poll to start a driver ("queue, then look" against "LEAVING, then look"),
no driver is launched while another one took requests from before its launcher read the
sequence until after it moved it (announce, then move the sequence: one launch per need), and no
driver runs more jobs at once than its slots.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from turnstile.core.clock import Clock
from turnstile.names import driverspool as names
from turnstile.state.spooldriver import SpoolDriver
from turnstile.state.spoollaunch import claim_launch
from turnstile.state.spoolreap import decoded_driver, decoded_request
from turnstile.state.spoolrecords import Outcome, RequestState, SpoolBounds, SpoolRequest, taking
from turnstile.state.spoolserve import serve
from turnstile.state.spoolsubmit import (
    JobState,
    driver_needed,
    driver_needed_for,
    job_status,
    start_overdue,
    submit,
    withdraw,
)
from turnstile.store.port import ObjectStore
from turnstile_dev.simulation.adapters import FaultyStore
from turnstile_dev.simulation.engine import Crash, Killed, Loop, LoopLock, Task
from turnstile_dev.simulation.slots import SimSlots

BOUNDS = SpoolBounds(stale_after=timedelta(seconds=120), start_within=timedelta(seconds=90))
STARTUP = (20.0, 60.0)  # a driver's start-up, seconds
DRIVER_POLL = 5.0  # an idle driver looks at the queue this often
RUNNER_POLL = (400.0, 900.0)  # a runner looks at its job this often: far slower than a driver
CALM_POLL = (2000.0, 3000.0)  # once faults stop: so slow that a request left with no driver shows
START_TIMEOUT = timedelta(seconds=600)  # DRIVER_START_TIMEOUT_SECONDS: a queued job gives up on a driver
PROMPT = 400.0  # once faults stop: a job is taken within this of its submit (its queue included)


class StallingStore(FaultyStore):
    """Also when faults are over, a call now and then takes seconds (well within the stale bound):
    it widens every window between two writes, or a write and a read, that a race could use."""

    def _before(self) -> None:
        if self._loop.rng.random() < 0.1:
            self._loop.pause(self._loop.rng.uniform(1, 20))
        super()._before()


@dataclass
class SpoolPlan:
    jobs: int  # submitted while faults happen
    calm_jobs: int  # submitted after the faults, when promptness is checked
    fault_end: float
    crash: float  # per storage operation of a driver, submitter or runner
    withdraws: float  # chance a job is withdrawn
    double_start: float  # chance a launched driver starts twice under its id
    lost_launch: float  # chance an announced driver is never launched
    by_hand: int  # spool objects removed by hand
    garbage: int  # request objects holding garbage
    max_idle: float
    lifetime: float
    scale_out: float  # chance a submit that found a driver taking requests starts another one too
    slots: int  # jobs a driver runs side by side

    @staticmethod
    def draw(rng: random.Random) -> SpoolPlan:
        return SpoolPlan(
            jobs=rng.randint(3, 25),
            calm_jobs=rng.randint(2, 15),
            fault_end=rng.uniform(600, 2400),
            crash=rng.choice([0.0, 0.005, 0.02, 0.05]),
            withdraws=rng.choice([0.0, 0.15, 0.4]),
            double_start=rng.choice([0.0, 0.2]),
            lost_launch=rng.choice([0.0, 0.15]),
            by_hand=rng.choice([0, 0, 1, 3]),
            garbage=rng.choice([0, 0, 1, 2]),
            max_idle=rng.choice([0.0, 3.0, 20.0, 90.0]),
            lifetime=rng.choice([120.0, 600.0, 3600.0]),
            scale_out=rng.choice([0.0, 0.3]),
            slots=rng.choice([1, 2, 4]),
        )


@dataclass
class SpoolWorld:
    seed: int
    plan: SpoolPlan
    loop: Loop
    store: ObjectStore  # as the actors see it: pauses and crashes
    memory: ObjectStore  # what it holds, read without faults
    stats: Counter[str]
    clock: Clock
    runs: Counter[str] = field(default_factory=Counter)
    submitted_at: dict[str, float] = field(default_factory=dict)
    first_run_at: dict[str, float] = field(default_factory=dict)
    withdrawals: dict[str, list[tuple[bool, str | None]]] = field(default_factory=dict)
    # A runner's poll that gave up on a driver (the start timeout): whether its withdraw won.
    timeouts: dict[str, list[bool]] = field(default_factory=dict)
    calm: set[str] = field(default_factory=set)
    junk: list[str] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # by hand
    queued: set[str] = field(default_factory=set)  # jobs whose submit returned
    running: int = 0  # driver tasks launched and not ended
    launching: int = 0  # submitters and runners inside `start_driver` (a launch may be under way)
    calm_after: float = 900.0  # after the faults, when leftovers (stalled calls, announced drivers) are over
    unexpected: list[str] = field(default_factory=list)  # an actor ended with an error it should not raise

    def task(self, name: str, crash: float | None = None) -> Task:
        return Task(name, deadline=None, crash_probability=self.plan.crash if crash is None else crash)

    # Submitters and runners

    def submit_job(self, job: str, at: float) -> None:
        def body() -> None:
            self.submitted_at.setdefault(job, self.loop.now)
            queued = submit(self.store, self.clock, job, "ds/tbl", {"manifest": f"{job}.json"}, bounds=BOUNDS)
            if queued.driver_needed:
                self.start_driver(lambda: driver_needed(self.store, self.clock, BOUNDS))
            elif self.loop.faults_on and self.loop.rng.random() < self.plan.scale_out:
                self.stats["drivers started beside a running one (scale-out)"] += 1
                self.start_driver(lambda: True)  # several drivers take requests at once
            self.queued.add(job)  # its submit returned: a driver takes it, or one was started for it
            self.check_queue()

        self.loop.spawn(at, self.task(f"submit {job}"), body, self.ended("submitters"))
        self.poll_job(job, at + self.loop.rng.uniform(*self.poll_every(job)))

    def poll_job(self, job: str, at: float) -> None:
        """The runner's status poll: reports a job whose driver died, starts a driver when none
        takes requests, submits again now and then (an attach, or the repair of a removed request)."""

        def body() -> None:
            while True:
                if self.loop.rng.random() < 0.3:
                    submit(self.store, self.clock, job, "ds/tbl", {"manifest": f"{job}.json"}, bounds=BOUNDS)
                state = job_status(self.store, self.clock, job, BOUNDS).state
                if state is JobState.FINISHED:
                    return
                if state is JobState.UNKNOWN:  # its submit never landed: the runner submits again
                    submit(self.store, self.clock, job, "ds/tbl", {"manifest": f"{job}.json"}, bounds=BOUNDS)
                why = start_overdue(self.store, self.clock, job, BOUNDS, START_TIMEOUT)
                if why is not None:  # as WarmRunner's poll: withdraw, a transient failure
                    won = withdraw(self.store, self.clock, job, reason=why).withdrawn
                    self.timeouts.setdefault(job, []).append(won)
                    self.stats["jobs a runner's poll gave up on (start timeout)"] += won
                    if won:
                        return

                def needed() -> bool:
                    return driver_needed_for(self.store, self.clock, job, BOUNDS)

                if needed():
                    self.stats["drivers a runner's poll started"] += 1
                    self.start_driver(needed)
                self.loop.pause(self.loop.rng.uniform(*self.poll_every(job)))

        def again(exc: BaseException | None) -> None:
            self.ended("runners")(exc)
            if exc is not None:
                self.poll_job(job, 60.0)

        self.loop.spawn(at - self.loop.now, self.task(f"poll {job}"), body, again)

    def poll_every(self, job: str) -> tuple[float, float]:
        return CALM_POLL if job in self.calm else RUNNER_POLL

    def withdraw_job(self, job: str, at: float) -> None:
        def body() -> None:
            done = withdraw(self.store, self.clock, job)
            self.withdrawals.setdefault(job, []).append((done.withdrawn, done.driver_id))

        self.loop.spawn(at, self.task(f"withdraw {job}"), body, self.ended("withdraws"))

    # Drivers

    def start_driver(self, still_needed: Callable[[], bool]) -> None:
        self.launching += 1
        try:
            self._start_driver(still_needed)
        finally:
            self.launching -= 1
        self.check_queue()  # a launch lost to a racing submitter, whose own launch is over

    def _start_driver(self, still_needed: Callable[[], bool]) -> None:
        before = self.taking_drivers()
        driver_id = claim_launch(self.store, self.clock, BOUNDS, still_needed, lambda number: f"drv-{number}")
        if driver_id is None:
            self.stats["launches left to a racing submitter"] += 1
            return
        self.check_one_launch(driver_id, before)
        rng = self.loop.rng
        if self.loop.faults_on and rng.random() < self.plan.lost_launch:
            self.stats["launches lost"] += 1
            return
        starts = 2 if self.loop.faults_on and rng.random() < self.plan.double_start else 1
        self.stats["drivers started twice"] += starts - 1
        for _ in range(starts):
            self.running += 1
            self.loop.spawn(
                rng.uniform(*STARTUP), self.task(driver_id), self.driver_body(driver_id), self.left
            )

    def taking_drivers(self) -> set[tuple[str, str, datetime]]:
        """The drivers taking requests now, as held (each with its state and start)."""
        now, held = self.clock.now(), set()
        for info in self.memory.list_objects(names.DRIVERS):
            found = self.memory.read(info.name)
            record = None if found is None else decoded_driver(found)
            if record is not None and taking(record, now, BOUNDS):
                held.add((record.driver_id, record.state.value, record.started_at))
        return held

    def check_one_launch(self, driver_id: str, before: set[tuple[str, str, datetime]]) -> None:
        """Once faults stop: a driver that took requests, unchanged, from before the launcher read
        the sequence until after it moved it, was there when the launcher read the drivers in
        between, so the launch is a second one for the same need."""
        if self.loop.faults_on or self.loop.now < self.plan.fault_end + self.calm_after:
            return
        throughout = {held for held in before & self.taking_drivers() if held[0] != driver_id}
        if throughout:
            self.unexpected.append(
                f"{driver_id} was launched at {self.loop.now:.0f} s while {sorted(h[0] for h in throughout)} "
                "took requests"
            )

    def left(self, exc: BaseException | None) -> None:
        self.ended("drivers")(exc)
        self.running -= 1
        self.check_queue()

    def check_queue(self) -> None:
        """Once faults stop, when no driver runs and no launch is under way (a submitter that lost
        the launch race to another relies on the winner's), no request is queued whose submit
        returned: its submitter was told a driver would take it."""
        if self.running or self.launching or self.loop.faults_on:
            return
        if self.loop.now < self.plan.fault_end + self.calm_after:
            return
        for info in self.memory.list_objects(names.REQUESTS):
            found = self.memory.read(info.name)
            request = None if found is None else decoded_request(found)
            if request is not None and request.state is RequestState.QUEUED and request.job_id in self.queued:
                self.unexpected.append(
                    f"{request.job_id} is left queued with no driver at {self.loop.now:.0f} s"
                )

    def driver_body(self, driver_id: str):  # type: ignore[no-untyped-def]
        born = self.loop.now

        def should_leave(idle_since: datetime | None, now: datetime) -> str | None:
            if self.loop.now - born > self.plan.lifetime:
                return "max lifetime"
            if idle_since is None:  # not idle yet: with no idle time allowed, it leaves at every ask
                return "idle" if self.plan.max_idle == 0 else None
            return "idle" if (now - idle_since).total_seconds() >= self.plan.max_idle else None

        def body() -> None:
            store = StallingStore(self.memory, self.loop, mortal=True)  # this process's: dies with it
            batch, mutex = f"batch-{driver_id}", LoopLock(self.loop)
            driver = SpoolDriver(store, self.clock, driver_id, batch=batch, bounds=BOUNDS, mutex=mutex)
            slots = SimSlots(self.loop, self.plan.slots, store, self.plan.crash)
            running: list[str] = []

            def run(request: SpoolRequest, _: Callable[[], bool]) -> tuple[Outcome, str | None]:
                running.append(request.job_id)
                try:
                    if len(running) > slots.size:
                        self.unexpected.append(f"{driver_id} ran {running} at once, with {slots.size} slots")
                    self.stats["jobs run beside another in one driver"] += len(running) > 1
                    return self.run(request, store)
                finally:
                    running.remove(request.job_id)

            reason = serve(driver, run, should_leave, self.clock, DRIVER_POLL, slots=slots)
            if reason.startswith("another start"):
                reason = "a second start of its id"
            elif reason not in {"idle", "max lifetime"}:
                reason = "fenced (declared dead while it ran)"
            self.stats[f"drivers ended: {reason}"] += 1

        return body

    def run(self, request: SpoolRequest, store: StallingStore) -> tuple[Outcome, str | None]:
        self.runs[request.job_id] += 1
        self.first_run_at.setdefault(request.job_id, self.loop.now)
        self.loop.pause(self.loop.rng.uniform(1, 20))  # the job's batches
        if not store.alive:
            raise Crash("the driver died while the job ran (another task of it crashed)")
        self.loop.maybe_crash()  # the driver died while the job ran
        if self.loop.rng.random() < 0.05:
            return Outcome.FAILED, "injected job failure"
        return Outcome.SUCCEEDED, None

    def ended(self, who: str):  # type: ignore[no-untyped-def]
        def on_exit(exc: BaseException | None) -> None:
            if isinstance(exc, Crash | Killed):
                self.stats[f"{who} crashed"] += 1
            elif exc is not None:
                self.stats[f"{who} failed: {type(exc).__name__}"] += 1
                self.unexpected.append(f"{who}: {type(exc).__name__}: {exc}")

        return on_exit

    # People

    def remove_by_hand(self, at: float) -> None:
        def body() -> None:
            found = self.memory.list_objects(names.REQUESTS) + self.memory.list_objects(names.DRIVERS)
            if found and self.loop.faults_on:
                victim = self.loop.rng.choice(found).name
                self.memory.remove(victim)
                self.removed.add(victim)
                self.stats["spool objects removed by hand"] += 1

        self.loop.spawn(at, self.task("by hand", 0.0), body, self.ended("people"))

    def add_garbage(self, index: int) -> None:
        job = f"junk-{index}"
        name = f"{names.REQUESTS}{index:020d}-{job}.json"
        self.memory.write(name, b"\x00 not a request")
        self.junk.append(name)
