"""A warm driver's slots (`turnstile.state.spoolslots.Slots`) in the simulation: each job a task of
the loop beside the driver's own, all of one process. A crash of any of them is the process's
death: its store fails every later call, so no other task of it reaches the bucket again."""

from __future__ import annotations

from collections.abc import Callable

from turnstile_dev.simulation.adapters import FaultyStore
from turnstile_dev.simulation.engine import Crash, Loop, Task

STEP = 1.0  # loop seconds between looks of a waiter (a job's end is seen this soon)


class SimSlots:
    def __init__(self, loop: Loop, size: int, store: FaultyStore, crash: float) -> None:
        self.size = size
        self.busy = 0
        self._loop = loop
        self._store = store  # the process's: a crash of one of its tasks kills it
        self._crash = crash
        self._ended = 0
        self._seen = 0
        self._error: BaseException | None = None

    def start(self, name: str, work: Callable[[], None]) -> None:
        def ended(exc: BaseException | None) -> None:
            self.busy -= 1
            self._ended += 1
            if isinstance(exc, Crash):
                self._store.die()
            if exc is not None and self._error is None:
                self._error = exc

        self.busy += 1
        self._loop.spawn(0.0, Task(name, deadline=None, crash_probability=self._crash), work, ended)

    def wait(self, seconds: float) -> None:
        waited = 0.0
        while self._ended == self._seen and self._error is None and waited < seconds:
            self._loop.pause(min(STEP, seconds - waited))
            waited += STEP
        self._seen = self._ended

    def check(self) -> None:
        if self._error is not None:
            raise self._error

    def join(self) -> None:
        while self.busy:
            self._loop.pause(STEP)
