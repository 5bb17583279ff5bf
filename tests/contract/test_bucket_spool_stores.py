"""The spool in the bucket's preconditions on real stores: the google-cloud-storage client against
fake-gcs-server, and boto3 against a moto server. Two drivers claiming the same request: one wins;
a withdraw racing a claim: one wins; two submitters announcing a driver: one launches it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from turnstile.names import driverspool as names
from turnstile.state.spooldriver import Claimed
from turnstile.state.spoollaunch import announce
from turnstile.state.spoolrecords import Outcome, RequestState, SpoolRequest
from turnstile.state.spoolserve import run_one
from turnstile.state.spoolsubmit import job_status, submit, withdraw
from turnstile.store.port import ObjectStore


@pytest.fixture(params=["gcs", "s3"])
def real_store(request: pytest.FixtureRequest) -> ObjectStore:
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]


def together(*calls: Callable[[], object]) -> list[object]:
    """Run the calls in threads released at once; their results in order."""
    start = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        start.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_drivers_claiming_the_same_request_one_wins(real_store: ObjectStore) -> None:
    clock = ManualClock()
    queued = submit(real_store, clock, "job-1", "ds/tbl", {"manifest": "m"}, bounds=BOUNDS)
    a, b = driver(real_store, clock, "a"), driver(real_store, clock, "b")
    assert a.register() and b.register()
    # Both read it QUEUED: the second compare-and-swap from that generation fails.
    found = real_store.read(queued.request)
    assert found is not None
    real_read = real_store.read
    reads = {"a": found, "b": found}
    for name, d in (("a", a), ("b", b)):
        d.store = _Reading(real_store, queued.request, reads[name])  # type: ignore[assignment]
    first, second = a.claim(queued.request), b.claim(queued.request)
    assert first is not None and second is None
    now = real_read(queued.request)
    assert now is not None and SpoolRequest.decode(now.data, "x").driver_id == "a"


def test_drivers_claiming_in_threads_run_the_job_once(real_store: ObjectStore) -> None:
    clock = ManualClock()
    submit(real_store, clock, "job-1", "ds/tbl", {}, bounds=BOUNDS)
    drivers = [driver(real_store, clock, f"d{i}") for i in range(3)]
    assert all(d.register() for d in drivers)
    claims = together(*(d.take for d in drivers))
    won = [c for c in claims if c is not None]
    assert len(won) == 1
    runs = Runs()
    winner = drivers[claims.index(won[0])]
    assert isinstance(won[0], Claimed)
    run_one(winner, won[0], runs)
    assert runs.count == {"job-1": 1}
    end = job_status(real_store, clock, "job-1", BOUNDS).end
    assert end is not None and end.outcome is Outcome.SUCCEEDED


def test_a_withdraw_racing_a_claim_one_wins(real_store: ObjectStore) -> None:
    clock = ManualClock()
    queued = submit(real_store, clock, "job-1", "ds/tbl", {}, bounds=BOUNDS)
    d = driver(real_store, clock)
    assert d.register()
    claimed, withdrawal = together(
        lambda: d.claim(queued.request), lambda: withdraw(real_store, clock, "job-1")
    )
    assert withdrawal is not None
    if claimed is None:
        assert withdrawal.withdrawn  # type: ignore[attr-defined]
        end = job_status(real_store, clock, "job-1", BOUNDS).end
        assert end is not None and end.outcome is Outcome.WITHDRAWN
    else:
        assert not withdrawal.withdrawn and withdrawal.driver_id == "d1"  # type: ignore[attr-defined]
        found = real_store.read(queued.request)
        assert found is not None and SpoolRequest.decode(found.data, "x").state is RequestState.CLAIMED


def test_two_submitters_announcing_the_same_driver_launch_it_once(real_store: ObjectStore) -> None:
    clock = ManualClock()
    results = together(*(lambda: announce(real_store, clock, "d1", "batch-1") for _ in range(3)))
    assert sorted(results, key=str) == [False, False, True]
    assert real_store.read(names.driver_name("d1")) is not None


class _Reading:
    """The store as one driver sees it: its read of `name` returns what it read before the race."""

    def __init__(self, inner: ObjectStore, name: str, seen: object) -> None:
        self._inner, self._name, self._seen = inner, name, seen

    def read(self, name: str) -> object:
        return self._seen if name == self._name else self._inner.read(name)

    def __getattr__(self, attribute: str) -> object:
        return getattr(self._inner, attribute)
