"""Gap-aware watermarks (turnstile.protocol.gaps): the watermark over the periods committed or
declared, with a gap in the middle, filled by a commit, a skip or mark-missing, and gaps: ignore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnstile.config.lineage_config import natural_time_of
from turnstile.config.load_config import LoadConfig
from turnstile.names.naturaltime import PRESETS
from turnstile.protocol.gaps import Coverage, Present, add, parse_period, present

H = timedelta(hours=1)
D = timedelta(days=1)
H0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return H0 + timedelta(hours=hours)


def committed(coverage: Coverage, period: timedelta, *rels: str, natural: str = "hourly") -> Coverage:
    found = [p for r in rels if (p := present(PRESETS[natural], r)) is not None]
    return add(coverage, period, found)


def test_hourly_without_a_gap_is_the_end_of_the_last_hour() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/11")
    assert cov.watermark("wait") == at(12)
    assert cov.missing() is None and cov.ahead == ()


def test_a_gap_in_the_middle_holds_the_watermark_at_the_missing_hour() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/12", "2026/01/01/13")
    assert cov.watermark("wait") == at(11)
    assert cov.missing() == at(11) and cov.gap_end() == at(12)
    assert cov.ahead == ((at(12), at(14)),)
    assert cov.watermark("ignore") == at(14)  # the last commit's, as before


def test_the_missing_hour_landing_jumps_the_watermark_over_what_lay_beyond() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/12", "2026/01/01/13")
    cov = committed(cov, H, "2026/01/01/11")
    assert cov.watermark("wait") == at(14) and cov.missing() is None and cov.ahead == ()


def test_a_declared_period_fills_the_gap_as_a_commit_does() -> None:
    """mark-missing and a skipped batch both add the period, declared."""
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/12")
    assert add(cov, H, [Present(at(11))]).watermark("wait") == at(13)


def test_two_gaps_fill_one_at_a_time() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/12", "2026/01/01/14")
    assert cov.ahead == ((at(12), at(13)), (at(14), at(15)))
    cov = add(cov, H, [Present(at(11))])
    assert cov.watermark("wait") == at(13) and cov.missing() == at(13)
    cov = add(cov, H, [Present(at(13))])
    assert cov.watermark("wait") == at(15) and cov.missing() is None


def test_daily_periods() -> None:
    cov = committed(Coverage(), D, "2026/01/01", "2026/01/03", natural="daily")
    assert cov.watermark("wait") == H0 + D and cov.missing() == H0 + D
    cov = committed(cov, D, "2026/01/02", natural="daily")
    assert cov.watermark("wait") == H0 + 3 * D


def test_a_regex_period() -> None:
    load = LoadConfig.model_validate(
        {"natural_time": {"regex": r"dt=(?P<time>[0-9]{8}T[0-9]{2})", "format": "%Y%m%dT%H", "period": "6h"}}
    )
    natural = load.lineage.natural_time
    assert natural is not None and natural == natural_time_of(load.natural_time, None)
    six = timedelta(hours=6)
    rels = ["dt=20260101T00", "dt=20260101T12"]
    cov = add(Coverage(), six, [p for r in rels if (p := present(natural, r)) is not None])
    assert cov.watermark("wait") == at(6) and cov.missing() == at(6)
    cov = add(cov, six, [Present(at(6))])
    assert cov.watermark("wait") == at(18)
    assert parse_period(natural, "20260101T06") == at(6)


def test_finer_batches_complete_their_period_once_a_later_one_is_present() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10/00", "2026/01/01/10/15")
    assert cov.watermark("wait") == at(10) and cov.missing() is None  # hour 10 may go on
    cov = committed(cov, H, "2026/01/01/11/00")
    assert cov.watermark("wait") == at(11)
    cov = committed(cov, H, "2026/01/01/13/00")  # hour 12 missing: 11 is complete, 13 is open
    assert cov.watermark("wait") == at(12) and cov.missing() == at(12)
    cov = add(cov, H, [Present(at(12))])
    assert cov.watermark("wait") == at(13)  # 13 has only a part yet


def test_a_late_commit_before_the_watermark_changes_nothing() -> None:
    cov = committed(Coverage(), H, "2026/01/01/10", "2026/01/01/11")
    assert committed(cov, H, "2026/01/01/09") == cov
    assert committed(cov, H, "b1") == cov  # a rel with no period


def test_ignore_follows_the_last_commit_and_keeps_no_gap() -> None:
    cov = add(Coverage(), H, [Present(at(10)), Present(at(12))], mode="ignore")
    assert cov.watermark("ignore") == at(13) and cov.frontier == at(13)
    assert cov.missing() is None and cov.ahead == ()


@pytest.mark.parametrize(
    ("natural", "text", "start"),
    [
        ("hourly", "2026/01/01/10", at(10)),
        ("daily", "2026/01/02", H0 + D),
        ("hourly", "/2026/01/01/10/", at(10)),
    ],
)
def test_parse_period_reads_the_natural_time_format(natural: str, text: str, start: datetime) -> None:
    assert parse_period(PRESETS[natural], text) == start


def test_parse_period_names_the_expected_format() -> None:
    with pytest.raises(ValueError, match=r"'2026-01-01T10'.*'%Y/%m/%d/%H', e.g. '2026/01/01/10'"):
        parse_period(PRESETS["hourly"], "2026-01-01T10")


def test_gaps_and_max_gap_wait_are_checked_when_load_json_is_read() -> None:
    assert LoadConfig.model_validate({}).lineage.gaps is None  # unset: decided by the dependents
    assert LoadConfig.model_validate({}).lineage.max_gap_wait == timedelta(hours=6)
    lineage = LoadConfig.model_validate({"gaps": "ignore", "max_gap_wait": "2h"}).lineage
    assert (lineage.gaps, lineage.max_gap_wait) == ("ignore", timedelta(hours=2))
    with pytest.raises(ValueError, match=r"gaps\n.*Input should be 'wait' or 'ignore'"):
        LoadConfig.model_validate({"gaps": "skip"})
    with pytest.raises(ValueError, match=r"max_gap_wait\n.*'6 hours' is not a duration"):
        LoadConfig.model_validate({"max_gap_wait": "6 hours"})
