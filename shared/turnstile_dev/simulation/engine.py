"""A deterministic discrete-event loop in which function invocations, jobs and people interleave.

Every storage operation and job-service call is a point where the running task pauses for a random
latency and the loop runs whatever is due next, so concurrent invocations interleave at every
operation, reproducibly from one seed. Tasks are greenlets: plain protocol code runs unchanged.
Faults are injected at those same points: a crash before or after the operation takes effect, a
transient error, a kill when the function's timeout passes.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import greenlet

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class Crash(Exception):
    """The instance running this task died (injected)."""


class Killed(Exception):
    """The task ran past its timeout and the platform stopped it."""


@dataclass
class Task:
    name: str
    deadline: float | None  # loop time after which the task is killed
    crash_probability: float  # per storage operation


class Loop:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._tasks: dict[Any, Task] = {}
        self._main = greenlet.getcurrent()
        self.faults_on = True

    def at(self, delay: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + max(delay, 0.0), next(self._seq), callback))

    def spawn(
        self,
        delay: float,
        task: Task,
        body: Callable[[], object],
        on_exit: Callable[[BaseException | None], None] = lambda _: None,
    ) -> None:
        """Run `body` as a task after `delay`; `on_exit` gets the exception it ended with, or None."""

        def run() -> None:
            try:
                body()
            except BaseException as exc:  # every ending is reported to the owner of the task
                on_exit(exc)
            else:
                on_exit(None)
            finally:
                self._tasks.pop(greenlet.getcurrent(), None)

        def start() -> None:
            if task.deadline is not None:
                task.deadline += self.now
            worker = greenlet.greenlet(run, parent=self._main)
            self._tasks[worker] = task
            worker.switch()

        self.at(delay, start)

    def current(self) -> Task | None:
        return self._tasks.get(greenlet.getcurrent())

    def pause(self, latency: float) -> None:
        """Called inside a task: let everything due in the next `latency` seconds run first."""
        me = greenlet.getcurrent()
        if me is self._main:
            return  # outside any task (set-up and checks): no interleaving
        self.at(latency, me.switch)
        self._main.switch()
        task = self._tasks.get(me)
        if task is not None and task.deadline is not None and self.now > task.deadline:
            raise Killed(f"{task.name} passed its timeout")

    def maybe_crash(self) -> None:
        task = self.current()
        if task is not None and self.faults_on and self.rng.random() < task.crash_probability:
            raise Crash(f"{task.name} crashed")

    def run(self, until: float, settled: Callable[[], bool]) -> bool:
        """Run due work until `until` (loop seconds); True when `settled()` held before that.

        `settled` is asked at most every 30 loop seconds: it reads the whole world."""
        checked = 0.0
        while self._queue:
            when, _, callback = heapq.heappop(self._queue)
            if when > until:
                return settled()  # it may have settled since the last look
            self.now = when
            callback()
            if self.now - checked >= 30:
                checked = self.now
                if settled():
                    return True
        return settled()

    def idle(self) -> bool:
        return not self._queue and not self._tasks


class LoopLock:
    """A lock between tasks of the loop (greenlets of one thread): a waiter pauses, where a
    thread's lock would block the loop itself."""

    def __init__(self, loop: Loop) -> None:
        self._loop = loop
        self._held = False

    def __enter__(self) -> None:
        while self._held:
            self._loop.pause(0.01)
        self._held = True

    def __exit__(self, *_: object) -> None:
        self._held = False


class SimClock:
    """The loop's time as wall-clock time."""

    def __init__(self, loop: Loop) -> None:
        self._loop = loop

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self._loop.now)

    def sleep(self, seconds: float) -> None:
        self._loop.pause(seconds)
