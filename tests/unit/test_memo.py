"""The library's cached_property: computed once per instance, and never one instance waiting on
another's computation (Python 3.11's functools.cached_property holds one lock per class)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from turnstile.core.memo import cached_property
from turnstile.protocol.state import TableState


class Slow:
    def __init__(self, meet: threading.Barrier) -> None:
        self.meet = meet
        self.computed = 0

    @cached_property
    def value(self) -> int:
        self.computed += 1
        self.meet.wait()  # both instances inside their computation at once, or a timeout
        return id(self)


def test_two_instances_compute_at_once_and_each_only_once() -> None:
    meet = threading.Barrier(2, timeout=10)
    pair = [Slow(meet), Slow(meet)]
    with ThreadPoolExecutor(2) as pool:
        values = list(pool.map(lambda s: s.value, pair))
    assert values == [id(s) for s in pair]
    assert [s.value for s in pair] == values and [s.computed for s in pair] == [1, 1]


def test_the_table_state_uses_it() -> None:
    # TableState's properties read storage; threads reading different tables must not queue.
    assert isinstance(TableState.__dict__["_lock"], cached_property)
