"""The spool's storage operations, as `make bench` counts them: per job through the production
runner and driver, and per minute of an idle driver's polling."""

from __future__ import annotations

import pytest

from turnstile_dev.bench import spool_ops


def test_every_job_of_a_backlog_is_served_once_and_its_operations_add_up() -> None:
    found = spool_ops.per_job(jobs=10)
    assert found["all_succeeded"] and found["drivers_launched"] == 1
    sides = found["submit_per_job"] + found["driver_per_job"] + found["status_per_job"]
    assert found["per_job"] == pytest.approx(sides)
    counted = sum(sum(kinds.values()) for kinds in found["by_operation"].values())
    assert counted == pytest.approx(found["per_job"] * 10)
    assert found["by_operation"]["status"] == {"read": 10}  # one read of each job's end
    assert found["by_operation"]["driver"]["delete"] == 10  # each request removed once it ended


def test_an_idle_driver_lists_the_spool_once_per_poll_and_writes_its_record_only_when_due() -> None:
    idle = spool_ops.per_idle_minute(poll_seconds=2.0, idle_minutes=5)
    assert idle["by_operation_per_minute"]["list"] == pytest.approx(30, abs=0.5)
    # The heartbeat is due every quarter of the stale bound (10 min): 0.4 writes a minute, not 30
    # (over these 5 minutes, the leaving driver's two writes add 0.4 more).
    assert idle["by_operation_per_minute"]["replace"] <= 1
    faster = spool_ops.per_idle_minute(poll_seconds=0.5, idle_minutes=1)
    assert faster["per_minute"] == pytest.approx(idle["per_minute"] * 4, rel=0.05)
    text = spool_ops.markdown({"spool_ops": spool_ops.measure()})
    assert "operations per job" in text and "per idle minute" in text
