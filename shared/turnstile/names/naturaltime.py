"""Natural time: the period of time a batch holds, read from its path; durations like "15m".

Pure. A table's `natural_time` (load.json) says how: `"hourly"` or `"daily"` (the `YYYY/MM/DD/HH`
or `YYYY/MM/DD` folders of the default layout, or a `$YYYYMMDDHH` / `$YYYYMMDD` partition), or a
regex with a named group `time`, a strptime `format` for it and the `period` one batch covers.
A batch whose rel goes on below the period it names holds part of it (`finer`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"([+-]?)([0-9]+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: str, *, signed: bool = False) -> timedelta:
    """`"15m"`, `"1h"`, `"2d"` (and `"-1h"` when `signed`) as a timedelta; ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None or (match.group(1) and not signed):
        sign = "an optional sign, " if signed else ""
        raise ValueError(
            f"{text!r} is not a duration: write {sign}a whole number and a unit s, m, h or d, "
            "e.g. '15m' or '1h'"
        )
    amount = int(match.group(2)) * (-1 if match.group(1) == "-" else 1)
    return timedelta(**{_UNITS[match.group(3)]: amount})


def format_duration(value: timedelta) -> str:
    """The shortest exact form `parse_duration` reads back (`"90m"`, `"1d"`, `"-1h"`)."""
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{sign}{seconds // size}{unit}"
    return f"{sign}{seconds}s"


@dataclass(frozen=True)
class NaturalTime:
    """How a rel names its period: `regex` (group `time`) searched in the rel, read by `format`."""

    regex: str
    format: str
    period: timedelta

    def start(self, rel: str) -> datetime | None:
        """The start of the period the rel names (UTC); None when the rel names none. ValueError
        when it names an impossible one."""
        match = re.search(self.regex, rel)
        if match is None or match.groupdict().get("time") is None:
            return None
        text, fmt = match.group("time"), self.format
        if text.startswith("$"):  # a `$YYYYMMDD[HH]` partition decorator of the default layout
            text, fmt = text[1:], fmt.replace("/", "")
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError as exc:
            raise ValueError(f"batch {rel!r}: {text!r} does not read as {fmt!r} ({exc})") from exc
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

    def end(self, rel: str) -> datetime | None:
        """The end of the period the rel names (exclusive)."""
        start = self.start(rel)
        return None if start is None else start + self.period

    def finer(self, rel: str) -> bool:
        """Whether the rel goes on in folders below the period it names (quarter-hour folders under
        an hourly period, hours under a daily one): the batch holds only part of the period."""
        match = re.search(self.regex, rel)
        if match is None or match.groupdict().get("time") is None:
            return False
        return bool(rel[match.end() :].partition("/")[2].strip("/"))

    def complete_through(self, rel: str) -> datetime | None:
        """How far a committed batch proves the table complete (ordered tables commit in path
        order): the end of its period, or, for a batch finer than the period, its start: the
        period's other parts may still come. ValueError on an impossible period."""
        return self.start(rel) if self.finer(rel) else self.end(rel)


PRESETS: dict[str, NaturalTime] = {
    "hourly": NaturalTime(
        r"(?:^|/)(?P<time>[0-9]{4}/[0-9]{2}/[0-9]{2}/[0-9]{2}|\$[0-9]{10})(?=/|$)",
        "%Y/%m/%d/%H",
        timedelta(hours=1),
    ),
    "daily": NaturalTime(
        r"(?:^|/)(?P<time>[0-9]{4}/[0-9]{2}/[0-9]{2}|\$[0-9]{8})(?=/|$)",
        "%Y/%m/%d",
        timedelta(days=1),
    ),
}
