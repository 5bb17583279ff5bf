"""The pure rules of watermarks, dependencies and derived steps (turnstile.protocol.dependencies)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from turnstile.config.load_config import LoadConfig
from turnstile.names.naturaltime import PRESETS
from turnstile.protocol.dependencies import (
    Unreadable,
    WaitForDelay,
    WaitForTable,
    advanced,
    blockers,
    due_steps,
    step_rel,
    steps_per_job,
)

H0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return H0 + timedelta(hours=hours)


def test_the_watermark_is_the_end_of_the_latest_period_committed_and_only_moves_forward() -> None:
    hourly = PRESETS["hourly"]
    assert advanced(hourly, None, ["2026/01/01/00", "2026/01/01/02"]) == at(3)
    assert advanced(hourly, at(3), ["2026/01/01/01"]) is None
    assert advanced(hourly, at(3), ["b1"]) is None  # a batch with no period does not move it
    assert advanced(hourly, None, ["2026/13/01/00"]) is None  # nor one naming an impossible date


def test_a_batch_finer_than_its_period_completes_only_the_periods_before_it() -> None:
    hourly, daily = PRESETS["hourly"], PRESETS["daily"]
    # quarter hours under an hourly natural time: hour 0 is complete only once hour 1 begins
    assert advanced(hourly, None, ["2026/01/01/00/00"]) == at(0)
    assert advanced(hourly, at(0), ["2026/01/01/00/15", "2026/01/01/00/45"]) is None
    assert advanced(hourly, at(0), ["2026/01/01/01/00"]) == at(1)
    assert advanced(hourly, at(1), ["2026/01/01/01"]) == at(2)  # the whole hour in one batch
    # hours under a daily natural time
    assert advanced(daily, None, ["2026/01/01/00", "2026/01/01/23"]) == at(0)
    assert advanced(daily, at(0), ["2026/01/02/00"]) == at(24)
    assert hourly.finer("incremental/2026/01/01/00/15") and not hourly.finer("incremental/2026/01/01/00")
    assert not hourly.finer("2026/01/01/00/")  # a trailing slash is no folder below


FACT = LoadConfig.model_validate(
    {"natural_time": "hourly", "depends_on": ["ds.a", {"table": "ds.b", "offset": "-1h"}], "delay": "15m"}
).lineage


def test_a_batch_waits_for_each_source_past_its_period_end_plus_offset_and_for_the_delay() -> None:
    found = blockers(FACT, "2026/01/01/03", {"ds/a": at(3), "ds/b": None}, now=at(4))
    assert found == (
        WaitForTable("ds/a", at(4), at(3)),
        WaitForTable("ds/b", at(3), None),
        WaitForDelay(at(4.25)),
    )
    assert blockers(FACT, "2026/01/01/03", {"ds/a": at(4), "ds/b": at(3)}, now=at(4.25)) == ()
    assert found[0].describe() == (
        "ds/a to reach 2026-01-01T04:00:00+00:00 (its watermark: 2026-01-01T03:00:00+00:00)"
    )


def test_a_batch_with_no_period_waits_for_nothing_and_an_impossible_one_for_an_operator() -> None:
    assert blockers(FACT, "b1", {}, now=at(0)) == ()
    (found,) = blockers(FACT, "2026/13/01/00", {}, now=at(0))
    assert isinstance(found, Unreadable) and "does not read as" in found.describe()


DERIVED = LoadConfig.model_validate(
    {
        "derived": {"step": "2h", "start": "2026-01-01T00:00:00Z", "maxstep": "6h"},
        "depends_on": ["ds.a"],
        "delay": "10m",
    }
).lineage


def test_derived_steps_run_from_the_start_to_where_sources_and_delay_allow() -> None:
    assert due_steps(DERIVED, None, {"ds/a": None}, now=at(100)) == []
    assert due_steps(DERIVED, None, {"ds/a": at(5)}, now=at(100)) == [at(0), at(2)]
    assert due_steps(DERIVED, at(4), {"ds/a": at(9)}, now=at(6)) == []  # step 4-6 ends 6:00, +10m
    assert due_steps(DERIVED, at(4), {"ds/a": at(9)}, now=at(6.2)) == [at(4)]
    assert due_steps(DERIVED, at(3), {"ds/a": at(9)}, now=at(100)) == [at(4), at(6)]  # aligned on start
    assert len(due_steps(DERIVED, None, {"ds/a": at(1000)}, now=at(1000), limit=5)) == 5


def test_steps_are_named_like_the_hourly_layout_and_maxstep_bounds_a_job() -> None:
    assert step_rel(at(27)) == "2026/01/02/03"
    assert steps_per_job(DERIVED, 10) == 3
    assert steps_per_job(DERIVED, 2) == 2
    assert steps_per_job(FACT, 10) == 10
