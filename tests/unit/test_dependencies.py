"""The pure rules of watermarks, dependencies and derived steps (turnstile.protocol.dependencies)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from turnstile.config.lineage_config import GapsMode
from turnstile.config.load_config import LoadConfig
from turnstile.names.naturaltime import PRESETS, NaturalTime
from turnstile.protocol.dependencies import (
    Unreadable,
    WaitForDelay,
    WaitForTable,
    blockers,
    due_steps,
    step_rel,
    steps_per_job,
)
from turnstile.protocol.gaps import Coverage, add, present

H0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return H0 + timedelta(hours=hours)


def mark(natural: NaturalTime, current: Coverage, rels: list[str], mode: GapsMode = "ignore") -> Coverage:
    return add(current, natural.period, [p for r in rels if (p := present(natural, r)) is not None], mode)


def test_with_gaps_ignore_the_watermark_is_the_end_of_the_latest_period_committed() -> None:
    hourly = PRESETS["hourly"]
    cov = mark(hourly, Coverage(), ["2026/01/01/00", "2026/01/01/02"])
    assert cov.watermark("ignore") == at(3)
    assert mark(hourly, cov, ["2026/01/01/01"]) == cov  # only moves forward
    assert mark(hourly, cov, ["b1"]) == cov  # a batch with no period does not move it
    assert mark(hourly, Coverage(), ["2026/13/01/00"]) == Coverage()  # nor one naming an impossible date


def test_a_batch_finer_than_its_period_completes_only_the_periods_before_it() -> None:
    hourly, daily = PRESETS["hourly"], PRESETS["daily"]
    for mode in ("ignore", "wait"):
        # quarter hours under an hourly natural time: hour 0 is complete only once hour 1 begins
        cov = mark(hourly, Coverage(), ["2026/01/01/00/00"], mode)
        assert cov.watermark(mode) == at(0)
        cov = mark(hourly, cov, ["2026/01/01/00/15", "2026/01/01/00/45"], mode)
        assert cov.watermark(mode) == at(0)
        cov = mark(hourly, cov, ["2026/01/01/01/00"], mode)
        assert cov.watermark(mode) == at(1)
        assert mark(hourly, cov, ["2026/01/01/01"], mode).watermark(mode) == at(2)  # the whole hour
        # hours under a daily natural time
        cov = mark(daily, Coverage(), ["2026/01/01/00", "2026/01/01/23"], mode)
        assert cov.watermark(mode) == at(0)
        assert mark(daily, cov, ["2026/01/02/00"], mode).watermark(mode) == at(24)
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
