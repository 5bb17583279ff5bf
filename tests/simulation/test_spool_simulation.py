"""The simulation of the warm drivers' spool in the bucket holds its invariants over hostile
schedules, replays identically, and catches a spool that breaks them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from turnstile.names import driverspool as names
from turnstile.state import spoolreap, spoolrecords, spoolsubmit
from turnstile.state.spooldriver import Claimed, SpoolDriver
from turnstile.state.spoolrecords import DriverState
from turnstile_dev.simulation.spoolrun import run_spool_many, run_spool_schedule


def test_three_hundred_spool_schedules_keep_every_invariant() -> None:
    stats: Counter[str] = Counter()
    count, failures = run_spool_many(300, 0, stats)
    assert failures == [], failures[:3]
    assert count == 300
    # The schedules were hostile: drivers crashed, stalled past the stale bound while running a
    # job, started twice, were never launched; jobs were withdrawn; objects were removed by hand.
    assert stats["drivers crashed"] > 300
    assert stats["jobs ran, then reported failed (a stalled driver declared dead)"] > 5
    assert stats["drivers started twice"] > 50
    assert stats["launches lost"] > 50
    assert stats["launches left to a racing submitter"] > 5  # the driver sequence's compare-and-swap
    assert stats["jobs WITHDRAWN"] > 100
    assert stats["spool objects removed by hand"] > 100
    assert stats["drivers ended: idle"] > 500 and stats["drivers ended: max lifetime"] > 50
    assert stats["jobs a runner's poll gave up on (start timeout)"] > 50  # DRIVER_START_TIMEOUT_SECONDS


def test_a_spool_schedule_replays_identically() -> None:
    first: Counter[str] = Counter()
    second: Counter[str] = Counter()
    assert run_spool_schedule(4242, first) == run_spool_schedule(4242, second)
    assert first == second


def _violations(seeds: range) -> Iterator[str]:
    """Each schedule's violations, played only as far as the caller reads (`any` stops at the
    first): a planted bug some schedules hit rarely costs the schedules up to its first catch."""
    return (problem for seed in seeds for problem in run_spool_schedule(seed))


def test_it_catches_a_driver_that_lists_the_queue_before_it_says_leaving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def leave(self: SpoolDriver, reason: str) -> list[str]:
        listed = [info.name for info in self.store.list_objects(names.REQUESTS)]
        self._write(state=DriverState.LEAVING, reason=reason)
        return listed

    monkeypatch.setattr(SpoolDriver, "leave", leave)
    # A submit must land between the listing and LEAVING once faults are over: about 1 seed in 180.
    assert any("left queued with no driver" in p for p in _violations(range(1000)))


def test_it_catches_a_claim_without_its_precondition(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = SpoolDriver.claim

    def unconditional(self: SpoolDriver, name: str) -> Claimed | None:
        store = self.store

        class Blind:
            def __getattr__(self, attribute: str) -> object:
                return getattr(store, attribute)

            def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
                return store.write(name, data)

        self.store = Blind()  # type: ignore[assignment]
        try:
            return claim(self, name)
        finally:
            self.store = store

    monkeypatch.setattr(SpoolDriver, "claim", unconditional)
    assert any("reported failed" in p or "withdrawn but ran" in p for p in _violations(range(400)))


def test_it_catches_a_spool_that_never_finds_a_driver_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (spoolrecords, spoolreap):
        monkeypatch.setattr(module, "death", lambda record, now, bounds: None)
    assert any("not settled" in p for p in _violations(range(10)))


def test_it_catches_a_status_poll_that_trusts_any_leaving_driver_to_serve_its_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spoolsubmit, "listed_by_leaving", lambda records, queued_at, now, bounds: True)
    # A launch lost while faults were on leaves a job to the runners' polls, which never start one.
    assert any("waited" in p and "for a driver" in p for p in _violations(range(600)))


def test_it_catches_a_start_timeout_that_gives_up_on_a_job_a_driver_took(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    withdraw = spoolsubmit.withdraw

    def trusting(
        store: object, clock: object, job_id: str, *, reason: str | None = None
    ) -> spoolsubmit.Withdrawal:
        done = withdraw(store, clock, job_id, reason=reason)  # type: ignore[arg-type]
        return spoolsubmit.Withdrawal(True, done.driver_id, done.end) if reason else done

    monkeypatch.setattr("turnstile_dev.simulation.spool.withdraw", trusting)
    assert any("its start timeout won, yet it ran" in p for p in _violations(range(100, 300)))
