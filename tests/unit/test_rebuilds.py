"""The pure parts of derived-step rebuilds: which steps read a source period, and request ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from turnstile.config.load_config import LoadConfig
from turnstile.protocol import dependencies, rebuilds
from turnstile.state.records import RebuildCause

START = datetime(2026, 1, 1, 10, tzinfo=UTC)


def steps(step: str = "1h") -> LoadConfig:
    return LoadConfig.model_validate(
        {"derived": {"step": step, "start": START.isoformat()}, "depends_on": ["ds.src"]}
    )


def at(h: float) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h)


def test_the_steps_that_read_a_source_period() -> None:
    hourly = steps().lineage
    assert dependencies.steps_over(hourly, at(11), at(12), timedelta(0)) == [at(11)]
    assert dependencies.steps_over(hourly, at(11), at(13), timedelta(0)) == [at(11), at(12)]
    # A step ending at E waits for the source up to E - 1h: it reads the hour before its own too.
    assert dependencies.steps_over(hourly, at(11), at(12), timedelta(hours=-1)) == [at(11), at(12)]
    assert dependencies.steps_over(hourly, at(8), at(9), timedelta(0)) == []  # before `start`
    daily = steps("24h").lineage
    assert dependencies.steps_over(daily, at(35), at(36), timedelta(0)) == [at(34)]
    assert dependencies.steps_over(daily, at(10), at(11), timedelta(0)) == [at(10)]


def cause(**changes: object) -> RebuildCause:
    base = RebuildCause(table="ds/src", rel="2026/01/01/11", success_generation=7, at=at(11.5))
    return base.model_copy(update=changes)


def test_a_rebuild_id_is_the_same_for_one_change_and_step_and_sorts_by_the_commit_time() -> None:
    first = rebuilds.request_id(cause(), "ds/mart", "2026/01/01/11")
    assert first == rebuilds.request_id(cause(), "ds/mart", "2026/01/01/11")
    others = {
        rebuilds.request_id(cause(), "ds/mart", "2026/01/01/12"),
        rebuilds.request_id(cause(), "ds/other", "2026/01/01/11"),
        rebuilds.request_id(cause(success_generation=8), "ds/mart", "2026/01/01/11"),
        rebuilds.request_id(cause(reprocess="r1"), "ds/mart", "2026/01/01/11"),
    }
    assert first not in others and len(others) == 4
    later = rebuilds.request_id(cause(at=at(11.6)), "ds/mart", "2026/01/01/10")
    assert first < later
    assert rebuilds.is_rebuild(f"ds/mart/_turnstile/reprocess/{first}.json")
    assert not rebuilds.is_rebuild("ds/mart/_turnstile/reprocess/20260101T113000000000Z-0a1b2c3d.json")
    assert rebuilds.requested_at(f"ds/mart/_turnstile/reprocess/{first}.json") == at(11.5)


DERIVED = {"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["src.orders"]}


@pytest.mark.parametrize(
    ("load", "problem"),
    [
        ({"mode": "replace_window", "time_column": "ts", "partition_by": ["hours(ts)"]}, "set derived"),
        (DERIVED | {"mode": "replace_window", "partition_by": ["hours(ts)"]}, "needs time_column"),
        (DERIVED | {"mode": "replace_window", "time_column": "ts"}, r"partition_by with hours\(ts\)"),
        (
            DERIVED | {"mode": "replace_window", "time_column": "ts", "partition_by": ["days(ts)"]},
            r"partition_by with hours\(ts\)",
        ),
    ],
    ids=["not-derived", "no-time-column", "no-partition", "coarser-than-the-step"],
)
def test_replace_window_is_refused_where_it_cannot_replace_a_window(
    load: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        LoadConfig.model_validate(load)


def test_replace_window_accepts_partitions_that_split_rows_at_the_step() -> None:
    daily = DERIVED | {"derived": {"step": "24h", "start": "2026-01-01T00:00:00Z"}}
    for partition in ("days(ts)", "hours(ts)"):
        load = daily | {"mode": "replace_window", "time_column": "ts", "partition_by": [partition]}
        assert LoadConfig.model_validate(load).mode == "replace_window"
