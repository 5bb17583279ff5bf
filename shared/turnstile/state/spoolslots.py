"""Where a warm driver runs its jobs side by side: a bounded number of slots, each job on a thread
of its own. The serving loop (`spoolserve.serve`) starts jobs, waits for one to end, and learns of
a job that ended the driver (its record fenced, its Spark context gone) by `check`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class Slots(Protocol):
    size: int

    @property
    def busy(self) -> int:
        """Jobs running now."""
        ...

    def start(self, name: str, work: Callable[[], None]) -> None:
        """Run `work` beside the loop (only while `busy < size`)."""
        ...

    def wait(self, seconds: float) -> None:
        """Until a job ends (one that ended since the last wait counts) or `seconds` pass."""
        ...

    def check(self) -> None:
        """Raise what a job ended with, if it ended by an exception: the driver stops with it."""
        ...

    def join(self) -> None:
        """Until every job ended."""
        ...


class ThreadSlots:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a driver needs at least one slot, not {size}")
        self.size = size
        self._changed = threading.Condition()
        self._running = 0
        self._ended = 0  # jobs that ended, ever
        self._seen = 0  # of those, how many a wait has returned for
        self._error: BaseException | None = None

    @property
    def busy(self) -> int:
        with self._changed:
            return self._running

    def start(self, name: str, work: Callable[[], None]) -> None:
        def body() -> None:
            try:
                work()
            except BaseException as exc:  # handed to the loop: it decides the driver's end
                with self._changed:
                    self._error = self._error or exc
            finally:
                with self._changed:
                    self._running -= 1
                    self._ended += 1
                    self._changed.notify_all()

        with self._changed:
            self._running += 1
        threading.Thread(target=body, name=name, daemon=True).start()

    def wait(self, seconds: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._ended > self._seen or self._error is not None, seconds)
            self._seen = self._ended

    def check(self) -> None:
        with self._changed:
            error = self._error
        if error is not None:
            raise error

    def join(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._running == 0)
