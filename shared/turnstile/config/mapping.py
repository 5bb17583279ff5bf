"""The `mapping` list of load.json: field mapping applied to a batch before it is written.

Each entry is one step, applied in list order to the result of the steps before it (then
transform.sql, then the write). The kinds, told apart by which of their keys an entry has:

- `{"rename": "payload.user.id", "to": "user_id"}`: move a field (top-level or nested) to a
  top-level column; the field is gone from where it was (an emptied struct goes too);
- `{"remove": "payload.debug"}`: drop a column or a nested field;
- `{"cast": "amount", "type": "decimal(10,2)"}`: convert a field; a row whose value does not
  convert is a bad row (counted against `max_bad_records`, set aside in `_failed/`);
- `{"constant": "source", "value": "web"}`: a column set to the value on every row;
- `{"default": "country", "value": "US"}`: the value where the column is null (or missing);
- `{"from_path": "time" | "rel" | "regex", "to": ...}`: a column from the batch's path: the
  time its layout folders name (YYYY/MM/DD/HH), its rel, or a named group of `regex` over its rel.

Pure: no Spark. The Spark side is `turnstile.spark.mapping`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from turnstile.config import ddl, mapping_values

KINDS = ("rename", "remove", "cast", "constant", "default", "from_path")

# A top-level column name a mapping creates: no dot (a dotted target would read as a nested path).
_TARGET = re.compile(r"[^.`]+")
_FIELD = re.compile(r"[^.`]+(?:\.[^.`]+)*")


def known_type(name: str) -> bool:
    """True for a Spark primitive type name (`int`, `decimal(10,2)`, `timestamp`...)."""
    return ddl.is_primitive(name)


def _type(value: str) -> str:
    if not known_type(value):
        raise ValueError(
            f"unknown type {value!r}; use a Spark type: boolean, int, bigint, double, "
            "decimal(p,s), string, date, timestamp, ... (complex types: use transform.sql)"
        )
    return value


def _target(value: str) -> str:
    if not _TARGET.fullmatch(value):
        raise ValueError(f"{value!r} is not a top-level column name (no dots or backticks)")
    return value


def _field(value: str) -> str:
    if not _FIELD.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a field: a column name or a dotted path such as 'payload.user.id'"
        )
    return value


SparkType = Annotated[str, AfterValidator(_type)]
Target = Annotated[str, AfterValidator(_target)]
FieldPath = Annotated[str, AfterValidator(_field)]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rename(_Entry):
    rename: FieldPath
    """The field to move: a column, or a nested field as a dotted path (`payload.user.id`)."""
    to: Target
    """The top-level column it becomes."""


class Remove(_Entry):
    remove: FieldPath
    """The column or nested field (dotted path) to drop."""


class Cast(_Entry):
    cast: FieldPath
    """The column or nested field (dotted path) to convert in place."""
    type: SparkType
    """The Spark type to convert to (`int`, `decimal(10,2)`, `timestamp`...)."""


class Constant(_Entry):
    constant: Target
    """The column set to `value` on every row (replaced when the batch has it)."""
    value: str | int | float | bool | None
    type: SparkType | None = None
    """The column's Spark type; default: the value's own (string, int or bigint, double, boolean)."""

    @model_validator(mode="after")
    def _null_needs_type(self) -> Constant:
        if self.value is None and self.type is None:
            raise ValueError(f'constant {self.constant!r}: a null value needs a "type" (the column\'s type)')
        _converts(f"constant {self.constant!r}", self.value, self.type)
        return self


class Default(_Entry):
    default: Target
    """The column whose nulls become `value` (a column the batch lacks is added with it)."""
    value: str | int | float | bool
    type: SparkType | None = None

    @model_validator(mode="after")
    def _value_fits_type(self) -> Default:
        _converts(f"default {self.default!r}", self.value, self.type)
        return self


def _converts(where: str, value: str | int | float | bool | None, kind: str | None) -> None:
    """Spark casts a value its type cannot take to null: every row would get null, so refuse it."""
    reason = None if kind is None else mapping_values.problem(value, kind)
    if reason is not None:
        raise ValueError(f"{where}: {reason}; write a value of that type, or change the type")


class FromPath(_Entry):
    from_path: Literal["time", "rel", "regex"]
    """`time`: the hour (or day, month, year) the batch's layout folders name, as a timestamp;
    `rel`: the batch's path below its table; `regex`: the named `group` of `regex` over the rel."""
    to: Target
    regex: str | None = None
    group: str | None = None
    type: SparkType | None = None
    """Type of the column; default timestamp for `time`, string otherwise."""

    @model_validator(mode="after")
    def _regex_and_group(self) -> FromPath:
        if self.from_path != "regex":
            if self.regex is not None or self.group is not None:
                raise ValueError("regex and group only apply to from_path 'regex'")
            return self
        if self.regex is None or self.group is None:
            raise ValueError('from_path "regex" needs "regex" (over the batch\'s rel) and "group" (its name)')
        try:
            pattern = re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"regex {self.regex!r} does not compile ({exc}); fix it") from exc
        if self.group not in pattern.groupindex:
            named = ", ".join(pattern.groupindex) or "none"
            raise ValueError(
                f"regex {self.regex!r} has no group named {self.group!r} (its named groups: {named}); "
                "name it with (?P<name>...)"
            )
        return self


def _kind(entry: Any) -> str | None:
    """Which kind an entry is: the one kind key it has (None when it has none or several)."""
    if isinstance(entry, _Entry):
        return _kind(entry.model_dump())
    if not isinstance(entry, dict):
        return None
    found = [key for key in KINDS if key in entry]
    return found[0] if len(found) == 1 else None


Entry = Annotated[
    Annotated[Rename, Tag("rename")]
    | Annotated[Remove, Tag("remove")]
    | Annotated[Cast, Tag("cast")]
    | Annotated[Constant, Tag("constant")]
    | Annotated[Default, Tag("default")]
    | Annotated[FromPath, Tag("from_path")],
    Discriminator(
        _kind,
        custom_error_type="mapping_kind",
        custom_error_message=(
            "a mapping entry is an object with exactly one of the keys " + ", ".join(KINDS)
        ),
    ),
]

Mapping = Annotated[tuple[Entry, ...], Field(default=())]


def target(entry: Entry) -> str | None:
    """The column an entry creates (None for remove and cast, which change fields in place)."""
    if isinstance(entry, Rename | FromPath):
        return entry.to
    if isinstance(entry, Constant):
        return entry.constant
    if isinstance(entry, Default):
        return entry.default
    return None


def source(entry: Entry) -> str | None:
    """The field an entry reads and must find in the batch (None for the kinds that create one)."""
    if isinstance(entry, Rename):
        return entry.rename
    if isinstance(entry, Remove):
        return entry.remove
    if isinstance(entry, Cast):
        return entry.cast
    return None


def describe(index: int, entry: Entry) -> str:
    """`mapping[2] (cast 'amount')`: how errors name an entry."""
    kind = _kind(entry) or "entry"
    return f"mapping[{index}] ({kind} {getattr(entry, kind)!r})"


def duplicate_targets(entries: tuple[Entry, ...]) -> list[str]:
    """One problem per entry that creates a column an earlier entry already created (a default
    after a constant or rename of the same column is meant to fill it: not a duplicate)."""
    seen: dict[str, int] = {}
    problems = []
    for index, entry in enumerate(entries):
        name = target(entry)
        if name is None or isinstance(entry, Default):
            continue
        earlier = seen.get(name.lower())
        if earlier is not None:
            problems.append(
                f"{describe(index, entry)} writes column {name!r}, which "
                f"{describe(earlier, entries[earlier])} already writes; give one of them another name"
            )
        else:
            seen[name.lower()] = index
    return problems
