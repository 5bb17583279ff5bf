"""How a destination regex's groups are read: which match is a table prefix (the folder a table's
state objects sit in: `_bqlock`, `_BACKFILL`, `_backlog/`), and what its `partition` group holds."""

from __future__ import annotations

import re

_PARTITION = re.compile(r"[0-9]{4}([0-9]{2}){0,3}|__UNPARTITIONED__")


def partition_problem(partition: str) -> str | None:
    """What is wrong with a partition decorator the path names (the folder `$2024050113`, read
    without its `$`), or None."""
    if not _PARTITION.fullmatch(partition):
        return f"partition decorator ${partition} is not YYYY[MM[DD[HH]]] or __UNPARTITIONED__"
    return None


def table_prefix_match(destination_regex: str, prefix: str) -> re.Match[str] | None:
    """The regex's match of a table prefix, its table group ending where the prefix does. A regex
    whose groups after the table are required (gcs_ocn_bq_ingest's README example,
    `.../(?P<table>...)/region=(?P<batch>...)/yyyy=...`) matches a prefix by its part up to the
    table group, as the original found a table from its state objects' folder."""
    for pattern in (destination_regex, _up_to_table(destination_regex)):
        match = re.compile(pattern).search(f"{prefix}/") if pattern else None
        if (
            match is not None
            and match.groupdict().get("table") is not None
            and match.end("table") == len(prefix)
        ):
            return match
    return None


def _up_to_table(pattern: str) -> str | None:
    """The regex up to the closing parenthesis of its `table` group; None without one."""
    start = pattern.find("(?P<table>")
    depth, at, in_class = 0, start, False
    while 0 <= at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return pattern[: at + 1]
        at += 1
    return None
