"""Spark DDL column lists (`id BIGINT, tags ARRAY<STRING>, s STRUCT<a: INT>`) read without Spark.

`load.json`'s `schema` and `table_schema` are read here where the file is read (by the functions,
`turnstile validate` and the job alike), so a type Spark does not have, a column without a type or
an unclosed `<` is named with its column and position before any batch reaches Spark. Only the
types are checked, not what follows them (`NOT NULL`, `COMMENT '...'`, `DEFAULT ...`): Spark's own
parser has the last word on those.
"""

from __future__ import annotations

import re

Fields = dict[str, "Fields | None"]
"""Field name -> its sub-fields (a struct) or None (any other type), in the DDL's order."""

_PRIMITIVE = {
    "boolean",
    "tinyint",
    "byte",
    "smallint",
    "short",
    "int",
    "integer",
    "bigint",
    "long",
    "float",
    "real",
    "double",
    "date",
    "timestamp",
    "timestamp_ltz",
    "timestamp_ntz",
    "string",
    "binary",
    "void",
}
_SIZED = {"char", "character", "varchar"}  # need (length)
_DECIMAL = {"decimal", "dec", "numeric"}  # (precision[, scale]) optional
_NESTED = {"array", "map", "struct"}
_UNIT = r"(?:year|month|day|hour|minute|second)"
_INTERVAL = re.compile(rf"\s+{_UNIT}(?:\s+to\s+{_UNIT})?", re.IGNORECASE)
_NAME = re.compile(r"\s*(`(?:[^`]|``)+`|[^\s:`,<>()]+)\s*:?\s*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AFTER_TYPE = re.compile(r"(?:not|comment|default|generated)\b", re.IGNORECASE)
TYPES = sorted(_PRIMITIVE | _SIZED | _DECIMAL | _NESTED | {"interval"})


def fields(ddl: str) -> Fields:
    """The columns of `ddl` with their struct fields; ValueError naming the column and what is
    wrong with it when a column has no name or type, or a type Spark does not know."""
    found: Fields = {}
    columns = split(ddl)
    if not columns:
        raise ValueError("names no column: write 'name TYPE, ...', e.g. 'id BIGINT, name STRING'")
    for column in columns:
        name, sub = _column(column)
        found[name] = sub
    return found


def is_primitive(text: str) -> bool:
    """True for a Spark type without fields or elements that a value can be cast to (`int`,
    `decimal(10,2)`, `varchar(5)`, `timestamp`); False for `array<...>`, `void` or no type at all."""
    word = _WORD.match(text.strip())
    if word is None or word.group(0).lower() in _NESTED | {"interval", "void"}:
        return False
    try:
        _, end = _type(text, "type")
    except ValueError:
        return False
    return not text[end:].strip()


def split(text: str, separator: str = ",") -> list[str]:
    """Split on `separator` outside <...>, (...) and quotes; blank parts dropped."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        if char in "'\"`":
            i = _closing_quote(text, i)
        elif char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [part for part in parts if part.strip()]


def _column(column: str) -> tuple[str, Fields | None]:
    match = _NAME.match(column)
    if match is None or not column[match.end() :].strip():
        raise ValueError(f"cannot read {column.strip()!r} as 'name TYPE'")
    name = match.group(1)
    name = name[1:-1].replace("``", "`") if name.startswith("`") else name
    rest = column[match.end() :]
    sub, end = _type(rest, f"column {name!r}")
    tail = rest[end:].strip()
    if tail and not _AFTER_TYPE.match(tail):
        raise ValueError(
            f"column {name!r}: {tail!r} after its type {rest[:end].strip()!r}; a column is "
            "'name TYPE [NOT NULL] [COMMENT ...]' and columns are separated by commas"
        )
    return name, sub


def _type(text: str, where: str) -> tuple[Fields | None, int]:
    """Read one type at the start of `text`: its struct fields (None for another type) and where
    it ends."""
    start = len(text) - len(text.lstrip())
    word = _WORD.match(text, start)
    if word is None:
        raise ValueError(f"{where}: expected a type at {text.strip()[:30]!r}")
    kind, end = word.group(0).lower(), word.end()
    if kind not in _PRIMITIVE | _SIZED | _DECIMAL | _NESTED | {"interval"}:
        raise ValueError(
            f"{where}: {word.group(0)!r} is not a Spark type (Spark's types: {', '.join(TYPES)})"
        )
    if kind == "interval":
        unit = _INTERVAL.match(text, end)
        return None, unit.end() if unit else end
    after = len(text) - len(text[end:].lstrip())
    opener = text[after : after + 1]
    if kind in _SIZED | _DECIMAL:
        if opener != "(":
            if kind in _SIZED:
                raise ValueError(f"{where}: {kind.upper()} needs a length, e.g. {kind.upper()}(10)")
            return None, end
        close = _closing(text, after, "(", ")", where)
        arguments = text[after + 1 : close]
        if not re.fullmatch(r"\s*\d+\s*" if kind in _SIZED else r"\s*\d+\s*(?:,\s*\d+\s*)?", arguments):
            raise ValueError(f"{where}: {kind.upper()}({arguments}) takes whole numbers")
        return None, close + 1
    if kind not in _NESTED:
        return None, end
    if opener != "<":
        raise ValueError(f"{where}: {kind.upper()} needs its element types in <...>, e.g. ARRAY<STRING>")
    close = _closing(text, after, "<", ">", where)
    inner = text[after + 1 : close]
    if kind == "struct":
        return ({} if not inner.strip() else _struct(inner, where)), close + 1
    parts = split(inner)
    if len(parts) != (1 if kind == "array" else 2):
        raise ValueError(
            f"{where}: {kind.upper()}<{inner}> takes "
            + ("one type" if kind == "array" else "a key and a value type")
        )
    for part in parts:
        _, part_end = _type(part, where)
        if part[part_end:].strip():
            raise ValueError(
                f"{where}: {part[part_end:].strip()!r} after {part[:part_end].strip()!r} "
                f"in {kind.upper()}<...>"
            )
    return None, close + 1


def _struct(inner: str, where: str) -> Fields:
    try:
        return fields(inner)
    except ValueError as exc:
        raise ValueError(f"{where}: in STRUCT<...>: {exc}") from None


def _closing(text: str, at: int, opener: str, closer: str, where: str) -> int:
    depth, i = 0, at
    while i < len(text):
        char = text[i]
        if char in "'\"`":
            i = _closing_quote(text, i)
        elif char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"{where}: {opener!r} at {text[at:].strip()[:30]!r} is never closed with {closer!r}")


def _closing_quote(text: str, at: int) -> int:
    """Index of the quote that closes the one at `at` (the end of `text` if none does)."""
    found = text.find(text[at], at + 1)
    return len(text) - 1 if found < 0 else found


_COLUMN = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_.]*)"
_TRANSFORM = re.compile(
    rf"\s*(?:{_COLUMN}|(?P<time>\w+)\s*\(\s*{_COLUMN}\s*\)"
    rf"|(?P<sized>\w+)\s*\(\s*(?:\d+\s*,\s*{_COLUMN}|{_COLUMN}\s*,\s*\d+)\s*\))\s*"
)
_TIME_TRANSFORMS = {
    "identity",
    "years",
    "year",
    "months",
    "month",
    "days",
    "day",
    "date",
    "hours",
    "hour",
    "date_hour",
}
_SIZED_TRANSFORMS = {"bucket", "truncate"}


def partition_transform(entry: str) -> None:
    """ValueError unless `entry` is a column or one of Iceberg's partition transforms."""
    match = _TRANSFORM.fullmatch(entry)
    if (
        match is None
        or (match["time"] and match["time"].lower() not in _TIME_TRANSFORMS)
        or (match["sized"] and match["sized"].lower() not in _SIZED_TRANSFORMS)
    ):
        raise ValueError(
            f"{entry!r} is not a partition of Iceberg's: write a column, or years(col), months(col), "
            "days(col), hours(col), bucket(N, col) or truncate(N, col)"
        )
