"""The driver policy replayed on arrival traces (turnstile_dev.bench.policy_replay): the replay's
arithmetic on cases worked by hand, scale-out and back, the lifetime, and the four traces of the
feature against their targets, with the figures docs/DRIVER.md prints."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from turnstile_dev.bench import policy_replay, report
from turnstile_dev.bench.policy_replay import offline_optimum, policy_costs, replay

ROOT = Path(__file__).resolve().parents[2]
WORK = 0.374  # the in-job seconds per batch docs/DRIVER.md's tables are computed with
COSTS = policy_costs()


def test_one_request_costs_what_one_dataproc_batch_costs() -> None:
    run = replay((100.0,), WORK, 40.0, COSTS)
    assert run.dcu_seconds == 720.0  # 40.374 s billed as the one-minute minimum at 12 DCU
    assert run.latencies == [pytest.approx(40.374)]
    assert (run.starts, run.peak_drivers, run.leaves) == (1, 1, {"rent-or-buy": 1})
    assert offline_optimum((100.0,), WORK, 40.0, COSTS) == 720.0


def test_a_request_that_comes_during_the_start_up_shares_the_driver() -> None:
    run = replay((0.0, 10.0), WORK, 40.0, COSTS)
    # Both wait for the one start-up, then run back to back; the minute covers them both.
    assert run.dcu_seconds == 720.0 and run.starts == 1
    assert run.latencies == [pytest.approx(40.374), pytest.approx(40.748 - 10)]


def test_a_backlog_costs_one_batch_for_all_of_it() -> None:
    run = replay((0.0,) * 100, WORK, 60.0, COSTS)
    assert run.dcu_seconds == pytest.approx(12 * (60 + 100 * WORK))
    assert run.starts == 1  # the queue drains within a start-up: another driver would come too late
    assert max(run.latencies) == pytest.approx(60 + 100 * WORK)


def test_long_jobs_scale_out_up_to_the_limit_and_the_extras_leave_first() -> None:
    # Requests every 100 s for an hour (at 4 DCU idle, worth waiting for), then 20 at once.
    arrivals = tuple(100.0 * k for k in range(36)) + (3600.0,) * 20
    costs = dataclasses.replace(policy_costs(idle_dcu=4), max_drivers=1, max_lifetime_seconds=14400)
    alone = replay(arrivals, 30.0, 60.0, costs)
    assert alone.peak_drivers == 1
    three = replay(arrivals, 30.0, 60.0, dataclasses.replace(costs, max_drivers=3))
    assert three.peak_drivers == 3
    assert max(three.latencies) < 0.7 * max(alone.latencies)
    # The first driver left after the first request (nothing seen yet); later the oldest outstays
    # both extras, which leave one start-up after the queue is gone.
    assert [why for _, why in three.departures] == [
        "rent-or-buy",
        "extra driver",
        "extra driver",
        "rent-or-buy",
    ]
    assert three.departures[2][0] - three.departures[1][0] < 30
    assert len(three.latencies) == len(arrivals)


def test_a_driver_retires_at_its_maximum_lifetime_and_a_successor_takes_over() -> None:
    every_half_minute = tuple(30.0 * k for k in range(3 * 120))  # three hours: always worth staying
    run = replay(every_half_minute, WORK, 40.0, COSTS)
    assert run.leaves == {"max lifetime": 3} and run.starts == 3
    assert len(run.latencies) == len(every_half_minute)
    # The first request of each driver waits its start-up; the others hardly wait.
    assert len([x for x in run.latencies if x >= 40]) == run.starts
    assert sorted(run.latencies)[len(run.latencies) // 2] == pytest.approx(WORK)


def test_the_offline_optimum_is_below_every_policy_and_equal_to_per_job_on_a_trickle() -> None:
    hourly = tuple(3600.0 * h for h in range(10))
    assert offline_optimum(hourly, WORK, 40.0, COSTS) == 10 * 720.0
    assert replay(hourly, WORK, 40.0, COSTS).dcu_seconds == 10 * 720.0
    burst = tuple(float(t) for t in range(0, 300, 7))
    assert offline_optimum(burst, WORK, 40.0, COSTS) <= replay(burst, WORK, 40.0, COSTS).dcu_seconds


@pytest.fixture(scope="module")
def found() -> list[dict[str, Any]]:
    return policy_replay.rows(WORK)


@pytest.fixture(scope="module")
def found_cheap_idle() -> list[dict[str, Any]]:
    return policy_replay.rows(WORK, idle_dcu=4)


def out_of_reach(row: dict[str, Any]) -> bool:
    """The target is below what the offline optimum itself reaches on this trace."""
    optimum = row["offline_optimum_dcu_seconds_per_batch"]
    if row["trace"].startswith("50 tables"):
        return optimum > 60
    if row["trace"].startswith("1 table every 2 minutes"):
        return optimum / row["per_job_dcu_seconds_per_batch"] > 0.5
    return False


@pytest.mark.parametrize("fixture", ["found", "found_cheap_idle"])
def test_each_trace_meets_its_target_or_the_target_is_out_of_any_policys_reach(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    rows: list[dict[str, Any]] = request.getfixturevalue(fixture)
    assert len(rows) == 8
    for row in rows:
        assert row["met"] or out_of_reach(row), row
        # Never below the optimum (the replay bills as the optimum does), and within the factor
        # proven for the cost model, under the real billing and start-up delays too.
        assert row["offline_optimum_dcu_seconds_per_batch"] <= row["dcu_seconds_per_batch"] + 0.01, row
        assert row["dcu_seconds_per_batch"] <= 2 * row["offline_optimum_dcu_seconds_per_batch"], row
        assert row["dcu_seconds_per_batch"] <= row["per_job_dcu_seconds_per_batch"] + 0.01, row
    hourly = [r for r in rows if r["trace"] == "1 table hourly"]
    backlog = [r for r in rows if r["trace"].startswith("a backlog")]
    assert all(r["met"] for r in hourly + backlog)


def test_the_figures_are_deterministic_and_the_ones_the_docs_print(
    found: list[dict[str, Any]], found_cheap_idle: list[dict[str, Any]]
) -> None:
    assert policy_replay.rows(WORK) == found
    driver_md = (ROOT / "docs" / "DRIVER.md").read_text()
    assert policy_replay.markdown(found) in driver_md
    assert policy_replay.markdown(found_cheap_idle) in driver_md


def test_the_replay_prices_dataproc_serverless_with_the_default_bounds() -> None:
    costs = policy_costs()
    assert (costs.max_drivers, costs.max_idle_seconds, costs.max_lifetime_seconds) == (4, 300.0, 3600.0)
    assert (costs.dcu, costs.startup_seconds, costs.min_billed_seconds) == (12, 60.0, 60.0)


def test_the_bench_report_prints_the_replay(found: list[dict[str, Any]]) -> None:
    results = {"driver_policy_replay": found, "dataproc_cost_model": {"batch_seconds": WORK}}
    section = report._driver_policy(results)
    assert section.endswith(policy_replay.markdown(found)) and "(0.374 s)" in section
    assert report._driver_policy({}) == "Not computed in this run.\n"  # results of an older bench
