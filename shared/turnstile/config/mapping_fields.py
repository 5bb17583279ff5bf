"""A batch's fields as a tree of names, and a mapping played over it without data.

The job (before it touches a row) and `turnstile validate` (against a schema or a sample of a
batch) both play the mapping over the fields the batch has, so a wrong entry is named the same way
in both: its index, its field, and what to do. Names compare case-insensitively, as Spark's do.
Also here: the value a `from_path` entry takes from a batch's path (Spark DDL is read into fields
by `turnstile.config.ddl`).
"""

from __future__ import annotations

import re
from datetime import datetime

from turnstile.config.ddl import Fields
from turnstile.config.mapping import Cast, Entry, FromPath, describe, source, target


def lookup(fields: Fields, dotted: str) -> tuple[str, ...] | None:
    """The field a dotted path names, spelled as the batch spells it; None when there is none."""
    found: list[str] = []
    level: Fields | None = fields
    for part in dotted.split("."):
        if level is None:
            return None
        name = next((key for key in level if key.lower() == part.lower()), None)
        if name is None:
            return None
        found.append(name)
        level = level[name]
    return tuple(found)


def removal(fields: Fields, path: tuple[str, ...]) -> tuple[str, ...]:
    """What to drop to remove `path`: the path itself, or the outermost struct it would leave
    with no field (Spark cannot hold an empty struct)."""
    cut = path
    while len(cut) > 1 and len(_level(fields, cut[:-1])) == 1:
        cut = cut[:-1]
    return cut


def _level(fields: Fields, path: tuple[str, ...]) -> Fields:
    level = fields
    for name in path:
        level = level.get(name) or {}  # a path lookup() found goes through structs only
    return level


def _without(fields: Fields, path: tuple[str, ...]) -> Fields:
    head, rest = path[0], path[1:]
    if not rest:
        return {k: v for k, v in fields.items() if k != head}
    below = fields[head]
    return {k: (_without(below, rest) if k == head and below is not None else v) for k, v in fields.items()}


def _with(fields: Fields, name: str) -> Fields:
    kept = {k: v for k, v in fields.items() if k.lower() != name.lower()}
    return kept | {name: None}


def play(fields: Fields, entries: tuple[Entry, ...]) -> tuple[Fields, list[str]]:
    """The fields after the mapping, and one problem per entry whose field is not there when its
    turn comes (each entry sees the fields the entries before it left)."""
    problems = []
    for index, entry in enumerate(entries):
        wanted = source(entry)
        if wanted is not None:
            path = lookup(fields, wanted)
            if path is None:
                problems.append(f"{describe(index, entry)}: {missing(fields, wanted)}")
                continue
            if isinstance(entry, Cast):
                continue
            fields = _without(fields, removal(fields, path))
        made = target(entry)
        if made is not None:
            fields = _with(fields, made)
    return fields, problems


def missing(fields: Fields, dotted: str) -> str:
    """Why a dotted path finds no field: where it stops, and what is there instead."""
    parts = dotted.split(".")
    for depth in range(len(parts), 0, -1):
        parent = lookup(fields, ".".join(parts[: depth - 1])) if depth > 1 else ()
        if parent is None:
            continue
        where = f"field {'.'.join(parent)!r}" if parent else "the batch"
        if parent and not _level(fields, parent):
            return f"{where} is no struct, so it has no field {parts[depth - 1]!r}; fix the entry or the data"
        level = _level(fields, parent) if parent else fields
        return (
            f"{where} has no field {parts[depth - 1]!r} (it has: {', '.join(level) or 'none'}); "
            "fix the entry or an entry before it, or the data"
        )
    return f"no field {dotted!r}"  # pragma: no cover - depth 1 always has the batch as parent


def check(fields: Fields, entries: tuple[Entry, ...]) -> list[str]:
    """The problems of a mapping over a batch with these fields."""
    return play(fields, entries)[1]


# --- the batch's path ---------------------------------------------------------------------------
def path_value(index: int, entry: FromPath, rel: str, natural_time: datetime | None) -> str | datetime:
    """The value a `from_path` entry gives every row of the batch at `rel`, whose path names
    `natural_time` (`paths.Batch.natural_time`); ValueError naming the entry when there is none."""
    if entry.from_path == "rel":
        return rel
    if entry.from_path == "regex":
        if entry.regex is None or entry.group is None:  # the model requires both
            raise ValueError(f'{describe(index, entry)}: from_path "regex" needs "regex" and "group"')
        match = re.search(entry.regex, rel)
        if match is None or match.group(entry.group) is None:
            raise ValueError(
                f"{describe(index, entry)}: regex {entry.regex!r} finds no group {entry.group!r} in "
                f"the batch's path {rel!r}; fix the regex (it runs over the path below the table)"
            )
        return match.group(entry.group)
    if natural_time is None:
        raise ValueError(
            f"{describe(index, entry)}: the batch's path {rel!r} names no time (YYYY/MM/DD/HH folders, "
            "a $YYYYMMDDHH partition, or yyyy/mm/dd/hh groups of the destination regex); use "
            '{"from_path": "regex"} for another layout'
        )
    return natural_time  # aware (UTC): Spark stores the instant, whatever the session's time zone


# --- Spark DDL and samples ----------------------------------------------------------------------
def sample_fields(value: object) -> Fields | None:
    """The fields of one decoded JSON value (a struct for an object, None for anything else)."""
    if not isinstance(value, dict):
        return None
    return {str(key): sample_fields(item) for key, item in value.items()}
