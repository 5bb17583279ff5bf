"""Natural time of a rel, durations, and the lineage keys of load.json."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from turnstile.config.load_config import LoadConfig
from turnstile.names.naturaltime import PRESETS, NaturalTime, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("2d", timedelta(days=2)),
        ("30s", timedelta(seconds=30)),
    ],
)
def test_durations_read_and_print_back(text: str, value: timedelta) -> None:
    assert parse_duration(text) == value
    assert format_duration(value) == text


def test_a_signed_duration_is_an_offset_only() -> None:
    assert parse_duration("-1h", signed=True) == timedelta(hours=-1)
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("-1h")


@pytest.mark.parametrize("text", ["", "1", "h", "1.5h", "1w", "soon"])
def test_a_bad_duration_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. '15m'"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("rel", "start"),
    [
        ("2026/01/02/03", datetime(2026, 1, 2, 3, tzinfo=UTC)),
        ("incremental/2026/01/02/03/b1", datetime(2026, 1, 2, 3, tzinfo=UTC)),
        ("$2026010203", datetime(2026, 1, 2, 3, tzinfo=UTC)),
        ("2026/01/02", None),
        ("b1", None),
    ],
)
def test_hourly_natural_time(rel: str, start: datetime | None) -> None:
    hourly = PRESETS["hourly"]
    assert hourly.start(rel) == start
    assert hourly.end(rel) == (None if start is None else start + timedelta(hours=1))


def test_daily_natural_time() -> None:
    assert PRESETS["daily"].start("2026/01/02/03") == datetime(2026, 1, 2, tzinfo=UTC)
    assert PRESETS["daily"].end("$20260102") == datetime(2026, 1, 3, tzinfo=UTC)


def test_a_regex_natural_time_and_an_impossible_date() -> None:
    custom = NaturalTime(r"dt=(?P<time>[0-9]{12})", "%Y%m%d%H%M", timedelta(minutes=15))
    assert custom.end("x/dt=202601020315") == datetime(2026, 1, 2, 3, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match="does not read as"):
        custom.start("dt=202613020315")


def test_the_lineage_keys_parse_once_into_values() -> None:
    load = LoadConfig.model_validate(
        {
            "depends_on": ["ds.a", {"table": "ds.b", "offset": "-1h"}, {"table": "x/y/z"}, "my-proj.ds.c"],
            "delay": "15m",
            "derived": {"step": "2h", "start": "2026-01-01T00:00:00Z", "maxstep": "6h"},
        }
    )
    found = load.lineage
    assert [(e.prefix, e.offset) for e in found.depends_on] == [
        ("ds/a", timedelta(0)),
        ("ds/b", timedelta(hours=-1)),
        ("x/y/z", timedelta(0)),
        ("my-proj.ds/c", timedelta(0)),
    ]
    assert (found.delay, found.step, found.steps_per_job) == (timedelta(minutes=15), timedelta(hours=2), 3)
    assert found.natural_time is not None and found.natural_time.period == timedelta(hours=2)
    assert found.derived and found.gated


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        ({"delay": "15x"}, "delay"),
        ({"depends_on": ["orders"]}, "must be `dataset.table`"),
        ({"depends_on": [{"table": "a.b", "offset": "soon"}]}, "depends_on.0.offset"),
        ({"natural_time": {"regex": "[0-9]+", "format": "%Y"}}, "named group"),
        ({"natural_time": {"regex": "(?P<time>x", "format": "%Y"}}, "does not compile"),
        ({"natural_time": {"regex": "(?P<time>x)", "format": "YYYY"}}, "no strptime directive"),
        ({"derived": {"step": "15m", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["a.b"]}, "whole hours"),
        ({"derived": {"step": "1h", "start": "2026-01-01T00:30:00Z"}, "depends_on": ["a.b"]}, "on the hour"),
        ({"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}}, "needs depends_on"),
    ],
)
def test_bad_lineage_keys_are_refused_naming_the_key(keys: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError, match=where.replace(".", r"\.")):
        LoadConfig.model_validate(keys)
