"""`turnstile status` shows the deployment's warm drivers and their queue, read from the spool in the
bucket as the drivers and the runners write it (fake-gcs-server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.cli.conftest import Run, World
from tests.spoolkit import BOUNDS, driver
from turnstile.state import spoolsubmit
from turnstile.state.spoolrecords import Outcome


class From:
    """A clock that started `ago` and moves only when told: the records it stamps are that old."""

    def __init__(self, ago: timedelta) -> None:
        self.current = datetime.now(UTC) - ago

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


def drivers(world: World) -> None:
    """d0 stopped beating 20 minutes ago; d1 started 10 minutes ago, ran job-a and now runs job-b,
    with job-c queued; d2 started a minute ago and has had nothing to do since."""
    store = world.store
    driver(store, From(timedelta(minutes=20)), "d0").register()  # type: ignore[arg-type]
    clock = From(timedelta(minutes=10))
    d1 = driver(store, clock, "d1")  # type: ignore[arg-type]
    assert d1.register()
    for job in ("job-a", "job-b"):
        spoolsubmit.submit(store, clock, job, "sales.orders", {}, bounds=BOUNDS)
        clock.sleep(1)
    a = d1.take()
    assert a is not None and a.request.job_id == "job-a" and d1.start(a)
    d1.finish(a, Outcome.SUCCEEDED)
    clock.sleep(60)
    b = d1.take()
    assert b is not None and b.request.job_id == "job-b" and d1.start(b)
    spoolsubmit.submit(store, From(timedelta(seconds=30)), "job-c", "web.clicks", {}, bounds=BOUNDS)
    assert driver(store, From(timedelta(minutes=1)), "d2").register()  # type: ignore[arg-type]


def test_text_lists_each_driver_with_its_state_work_and_cost_and_the_queue(run: Run, world: World) -> None:
    drivers(world)
    result = run("status")
    # A dead driver is not a table's problem: its jobs are retried.
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "warm drivers: 3, requests queued: 1" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(("d0 ", "d1 ", "d2 "))}
    assert rows["d0"].split()[:3] == ["d0", "batch-d0", "DEAD"]
    assert "no heartbeat since" in rows["d0"]
    d1 = rows["d1"].split()
    assert d1[:3] == ["d1", "batch-d1", "RUNNING"]
    assert d1[4:7] == ["1", "job-b", "1/1"]  # one job served, job-b running in its one slot
    d2 = rows["d2"].split()
    assert (d2[:3], d2[4:6]) == (["d2", "batch-d2", "RUNNING"], ["0", "-"])


def test_json_gives_ages_idle_time_and_the_modelled_dcu_seconds(run: Run, world: World) -> None:
    drivers(world)
    report = json.loads(run("status", "-o", "json").stdout)["warm_drivers"]
    assert report["queued"] == 1
    found = {d["driver_id"]: d for d in report["drivers"]}
    assert found["d0"]["state"] == "DEAD" and found["d0"]["heartbeat_age_seconds"] > 1200
    assert found["d0"]["dcu_seconds"] == 0  # it never beat after it started
    d1 = found["d1"]
    assert (d1["state"], d1["jobs_served"], d1["serving"]) == ("RUNNING", 1, "job-b")
    assert (d1["busy_slots"], d1["slots"]) == (1, 1)
    assert d1["idle_seconds"] is None
    assert 600 <= d1["age_seconds"] < 700 and 600 * 12 <= d1["dcu_seconds"] < 700 * 12
    d2 = found["d2"]
    assert (d2["jobs_served"], d2["serving"]) == (0, None)
    assert 60 <= d2["idle_seconds"] < 120


def test_a_deployment_without_warm_drivers_prints_no_driver_section(run: Run, world: World) -> None:
    world.upload("01")
    result = run("status")
    assert "warm drivers" not in result.stdout
    assert json.loads(run("status", "-o", "json").stdout)["warm_drivers"] == {"drivers": [], "queued": 0}
