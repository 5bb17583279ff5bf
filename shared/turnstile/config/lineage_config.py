"""The lineage keys of load.json: natural time, dependencies, delay, derived-table steps.

Typed and checked when load.json is read, so a bad duration or format is reported with the file and
the key; `Lineage` turns them into the values the protocol computes with (durations parsed once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, field_validator

from turnstile.names.naturaltime import PRESETS, NaturalTime, parse_duration


def _duration(text: str) -> str:
    parse_duration(text)
    return text


def _offset(text: str) -> str:
    parse_duration(text, signed=True)
    return text


Duration = Annotated[str, AfterValidator(_duration)]
GapsMode = Literal["wait", "ignore"]
DEFAULT_MAX_GAP_WAIT = "6h"
Offset = Annotated[str, AfterValidator(_offset)]


class NaturalTimeRegex(BaseModel):
    """A natural time read from the rel by a regex with a named group `time`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regex: str
    format: str  # strptime format of the `time` group, e.g. "%Y%m%d%H"
    period: Duration = "1h"

    @field_validator("regex")
    @classmethod
    def _has_time_group(cls, regex: str) -> str:
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise ValueError(f"natural_time.regex {regex!r} does not compile: {exc}") from exc
        if "time" not in compiled.groupindex:
            raise ValueError(f"natural_time.regex {regex!r} needs a named group (?P<time>...)")
        return regex

    @field_validator("format")
    @classmethod
    def _format_reads_back(cls, fmt: str) -> str:
        sample = datetime(2026, 1, 2, 3, 4, 5)
        try:
            datetime.strptime(sample.strftime(fmt), fmt)
        except ValueError as exc:
            raise ValueError(f"natural_time.format {fmt!r} is not a strptime format: {exc}") from exc
        if fmt == sample.strftime(fmt):
            raise ValueError(f"natural_time.format {fmt!r} has no strptime directive such as %Y or %H")
        return fmt


class Dependency(BaseModel):
    """A table this table waits for: `"ds.tbl"` or `{"table": "ds.tbl", "offset": "-1h"}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str
    offset: Offset = "0h"

    @property
    def prefix(self) -> str:
        """The table's folder in the bucket: `ds.tbl` is `ds/tbl` and `project.ds.tbl` is
        `project.ds/tbl` (the project-qualified layout); a name with `/` is the folder itself."""
        if "/" in self.table:
            return self.table.strip("/")
        dataset, _, table = self.table.rpartition(".")
        return f"{dataset}/{table}"

    @field_validator("table")
    @classmethod
    def _names_a_table(cls, table: str) -> str:
        if "/" not in table and "." not in table:
            raise ValueError(f"depends_on table {table!r} must be `dataset.table` (or the table's folder)")
        return table


class DerivedSteps(BaseModel):
    """A table with no files of its own: its batches are time steps of `step` from `start`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: Duration = "1h"
    start: AwareDatetime
    maxstep: Duration | None = None  # at most this much time per job (default: max_batches_per_job steps)

    @field_validator("step")
    @classmethod
    def _whole_hours(cls, step: str) -> str:
        value = parse_duration(step)
        if value < timedelta(hours=1) or value % timedelta(hours=1):
            raise ValueError(
                f"derived.step {step!r} must be whole hours or days (a step is named YYYY/MM/DD/HH)"
            )
        return step

    @field_validator("start")
    @classmethod
    def _on_the_hour(cls, start: datetime) -> datetime:
        if start.minute or start.second or start.microsecond:
            raise ValueError(f"derived.start {start.isoformat()} must be on the hour")
        return start


def dependency(value: object) -> object:
    """A plain string in `depends_on` is a dependency with no offset."""
    return {"table": value} if isinstance(value, str) else value


@dataclass(frozen=True)
class Edge:
    prefix: str  # the source table's folder
    offset: timedelta


@dataclass(frozen=True)
class Lineage:
    """A table's lineage keys with every duration parsed (from one resolved LoadConfig)."""

    natural_time: NaturalTime | None
    depends_on: tuple[Edge, ...]
    delay: timedelta
    step: timedelta | None  # derived tables only
    start: datetime | None
    steps_per_job: int | None  # derived tables with a maxstep
    gaps: GapsMode | None = None  # unset: "wait" once other tables depend on it (docs/CONFIGURATION.md)
    max_gap_wait: timedelta = timedelta(hours=6)  # a missing period older than this is alerted on

    @property
    def derived(self) -> bool:
        return self.step is not None

    @property
    def gated(self) -> bool:
        """Whether batches of this table wait for anything."""
        return bool(self.depends_on) or bool(self.delay)


def natural_time_of(value: str | NaturalTimeRegex | None, derived: DerivedSteps | None) -> NaturalTime | None:
    """A derived table's steps are named like the hourly layout and last `step`; other tables say."""
    if derived is not None:
        return NaturalTime(PRESETS["hourly"].regex, PRESETS["hourly"].format, parse_duration(derived.step))
    if value is None:
        return None
    if isinstance(value, str):
        return PRESETS[value]
    return NaturalTime(value.regex, value.format, parse_duration(value.period))


def lineage(
    natural_time: str | NaturalTimeRegex | None,
    depends_on: tuple[Dependency, ...],
    delay: str,
    derived: DerivedSteps | None,
    *,
    gaps: GapsMode | None = None,
    max_gap_wait: str = DEFAULT_MAX_GAP_WAIT,
) -> Lineage:
    """The lineage keys of one LoadConfig as values (their text was checked when it was read)."""
    step = parse_duration(derived.step) if derived else None
    per_job = None
    if derived is not None and step is not None and derived.maxstep is not None:
        per_job = max(1, parse_duration(derived.maxstep) // step)
    return Lineage(
        natural_time=natural_time_of(natural_time, derived),
        depends_on=tuple(Edge(d.prefix, parse_duration(d.offset, signed=True)) for d in depends_on),
        delay=parse_duration(delay),
        step=step,
        start=derived.start.astimezone(UTC) if derived else None,
        steps_per_job=per_job,
        gaps=gaps,
        max_gap_wait=parse_duration(max_gap_wait),
    )
