"""The tables page's and the lineage page's data, read in the background while the console is used.

Reading every table's status costs a listing of each table's state objects (or one of the whole
prefix) and a few reads per table: seconds on a big bucket. The console keeps the last reading and
starts the next one `every` seconds after the last began; a page shows the reading it was served
from and its age ("as of N s ago"). A page never shows a reading older than `max_age`: past it, the
page waits for a reading begun after it asked (the first page load waits for the first reading).
After `idle` seconds without a page asking, the readings stop, to start again on the next page.

Only what is shown comes from here: an action reads its table afresh through the ops layer before
it acts, and the table read afresh after it replaces the table's row (`update`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from turnstile.config.cascade import ConfigReader
from turnstile.core import logs
from turnstile.ops.lineage_graph import Graph
from turnstile.ops.status import Progress, TableStatus

log = logs.get("ui")


@dataclass(frozen=True)
class Reading:
    statuses: tuple[TableStatus, ...]
    graph: Graph
    read_at: datetime  # when the reading began: every object shown was read after it
    began: float  # time.monotonic() then
    seconds: float  # how long it took
    configs: ConfigReader | None = None  # the `_config/` levels it read

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.monotonic() if now is None else now) - self.began)


@dataclass(frozen=True)
class Partial:
    """How far the reading under way has got; what a page shows while no reading is young enough."""

    began: float  # time.monotonic() when the reading began (or, none begun yet, when asked)
    total: int | None  # tables found; None while they are still searched for (the bucket listed)
    read: int  # tables read
    statuses: tuple[TableStatus, ...]  # those read and shown, each read after `began`

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.monotonic() if now is None else now) - self.began)


class _Progress(Progress):
    """The reading under way's reports, kept by the snapshot for its pages (any thread)."""

    def __init__(self, changed: threading.Condition, began: float) -> None:
        self._changed = changed
        self.now = Partial(began, None, 0, ())

    def found(self, tables: int) -> None:
        with self._changed:
            self.now = replace(self.now, total=tables)

    def read(self, shown: TableStatus | None) -> None:
        with self._changed:
            rows = self.now.statuses if shown is None else (*self.now.statuses, shown)
            self.now = replace(self.now, read=self.now.read + 1, statuses=rows)


class Snapshot:
    def __init__(
        self,
        read: Callable[[Progress], Reading],
        *,
        every: float,
        max_age: float,
        idle: float = 300.0,
        patience: float = 0.5,
    ) -> None:
        self._read = read
        self.every = every
        self.max_age = max_age
        self.idle = idle
        self.patience = patience
        self._changed = threading.Condition()
        self._current: Reading | None = None
        self._error: Exception | None = None  # of the last reading, if it failed
        self._attempt = 0  # readings ended, failed ones too
        self._progress: _Progress | None = None  # the reading under way's
        self._asked = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        """Begin reading in the background (the console's startup; a page does it if not done)."""
        with self._changed:
            self._stopped = False
            self._asked = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="console-snapshot", daemon=True)
                self._thread.start()

    def stop(self, wait: float = 60.0) -> None:
        """Stop reading; wait (up to `wait` seconds) for a reading under way to end."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
            running = self._thread
        if running is not None:
            running.join(wait)

    def current(self) -> Reading | Partial:
        """The last reading if younger than `max_age`; else the next one if it ends within
        `patience` seconds; else how far it has got. Raises what a reading raised if the last one
        failed (and none young enough is left)."""
        asked = time.monotonic()
        deadline = asked + self.patience
        with self._changed:
            self.start()  # under the same lock as the loop's check for idleness: it cannot miss this
            while True:
                found = self._current
                if found is not None and asked - found.began <= self.max_age:
                    return found
                ended = self._attempt
                self._changed.notify_all()  # wake the loop: a reading is due now
                while self._attempt == ended and (left := deadline - time.monotonic()) > 0:
                    self._changed.wait(left)
                if self._error is not None and (self._current is None or self._current.began < asked):
                    raise self._error
                if self._attempt == ended:  # out of patience: how far the reading has got
                    under_way = self._progress
                    return under_way.now if under_way is not None else Partial(asked, None, 0, ())

    def recent(self) -> Reading | None:
        """The last reading if younger than `max_age`; None otherwise (nothing is read)."""
        with self._changed:
            found = self._current
        return found if found is not None and found.age() <= self.max_age else None

    def update(self, status: TableStatus) -> None:
        """A table read afresh (after an action) replaces its row in the last reading."""
        with self._changed:
            found = self._current
            if found is None:
                return
            rows = tuple(status if s.uri == status.uri else s for s in found.statuses)
            self._current = replace(found, statuses=rows)

    def _due(self) -> bool:
        """Whether to read now; waits (under the condition) until then."""
        while not self._stopped:
            now = time.monotonic()
            found = self._current
            if now - self._asked > self.idle:
                return False  # nobody looks: stop until a page asks
            wait = 0.0 if found is None else found.began + found.seconds + self.every - now
            if wait <= 0 or (found is not None and self._asked - found.began > self.max_age):
                return True
            self._changed.wait(wait)
        return False

    def _loop(self) -> None:
        while True:
            with self._changed:
                if not self._due():
                    self._thread = None
                    return
            began = time.monotonic()
            with self._changed:
                self._progress = progress = _Progress(self._changed, began)
            try:
                reading = self._read(progress)
            except Exception as exc:
                log.exception("console snapshot failed")
                with self._changed:
                    self._progress = None
                    self._error, self._attempt = exc, self._attempt + 1
                    self._changed.notify_all()
                time.sleep(min(self.every, 1.0))  # not in a tight loop on a store that refuses
                continue
            with self._changed:
                self._current = replace(reading, began=began, seconds=time.monotonic() - began)
                self._progress = None
                self._error, self._attempt = None, self._attempt + 1
                self._changed.notify_all()
