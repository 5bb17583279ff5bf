"""How values are shown in the CLI's tables."""

from __future__ import annotations

from datetime import UTC, datetime

from turnstile.ops.render import cell

MOMENT = datetime(2024, 12, 31, 23, 30, 0, 123456, tzinfo=UTC)


def test_a_querys_timestamps_keep_their_fraction_of_a_second() -> None:
    """`turnstile query` printed 23:30:00 for 23:30:00.123456: a check for truncation was misled."""
    assert cell(MOMENT, precise=True).plain == "2024-12-31 23:30:00.123456"
    assert cell(MOMENT.replace(microsecond=0), precise=True).plain == "2024-12-31 23:30:00"


def test_the_operators_views_keep_whole_seconds() -> None:
    assert cell(MOMENT).plain == "2024-12-31 23:30:00"
