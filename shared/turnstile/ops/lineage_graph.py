"""The `depends_on` graph of the tables `status` found: each table that has dependencies or is one,
and per edge the source's watermark and what the dependent waits for from it now.

What a dependent waits for comes from `status_lineage.current_waits`, the reading `turnstile status`
puts in words, so the graph and status never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from turnstile.core.errors import ConfigError, PathError
from turnstile.ops import status_lineage
from turnstile.ops.status import TableStatus
from turnstile.protocol import lineage, watermarks
from turnstile.protocol.context import Invocation
from turnstile.protocol.dependencies import WaitForTable
from turnstile.protocol.lock import read as read_lock
from turnstile.protocol.state import TableState


@dataclass(frozen=True)
class Node:
    prefix: str  # the table's folder
    name: str  # dataset.table
    health: str | None  # None: a source with no objects in the bucket (not created yet, or a typo)
    watermark: datetime | None
    derived: bool


@dataclass(frozen=True)
class Edge:
    source: str  # folder
    dependent: str  # folder
    watermark: datetime | None  # the source's
    waits_for: datetime | None  # the dependent waits for the source to reach this; None: not waiting on it
    offset: timedelta  # depends_on's offset


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    errors: tuple[str, ...]  # configs that could not be read: their edges are missing


def prefix_of(status: TableStatus) -> str:
    return status.uri.split("://", 1)[1].partition("/")[2]


def graph(inv: Invocation, found: list[TableStatus]) -> Graph:
    by_prefix = {prefix_of(s): s for s in found}
    edges: list[Edge] = []
    errors: list[str] = []
    derived: set[str] = set()
    for prefix, status in by_prefix.items():
        try:
            table = watermarks.table_at(inv, prefix)
            keys = lineage.configured(inv, table)
        except (ConfigError, PathError) as exc:
            errors.append(f"{status.table}: {exc}")
            continue
        if not keys.depends_on:
            continue
        if keys.derived:
            derived.add(prefix)
        needed = _needed(inv, TableState(inv, table), errors)
        for dependency in keys.depends_on:
            source = by_prefix.get(dependency.prefix)
            mark = source.watermark if source is not None else _watermark(inv, dependency.prefix)
            edges.append(
                Edge(dependency.prefix, prefix, mark, needed.get(dependency.prefix), dependency.offset)
            )
    linked = {e.source for e in edges} | {e.dependent for e in edges}
    nodes = []
    for prefix in sorted(linked):
        shown = by_prefix.get(prefix)
        if shown is None:
            name = prefix.replace("/", ".")
            nodes.append(Node(prefix, name, None, _watermark(inv, prefix), False))
        else:
            nodes.append(Node(prefix, shown.table, shown.health.value, shown.watermark, prefix in derived))
    return Graph(tuple(nodes), tuple(edges), tuple(errors))


def _needed(inv: Invocation, state: TableState, errors: list[str]) -> dict[str, datetime]:
    """Per source folder, the watermark the dependent's head batch (or next step) waits for."""
    try:
        held, _ = read_lock(inv, state.table)
        waits = status_lineage.current_waits(inv, state, held)
    except ConfigError as exc:
        errors.append(str(exc))
        return {}
    return {b.table: b.needed for b in waits.blockers if isinstance(b, WaitForTable)}


def _watermark(inv: Invocation, prefix: str) -> datetime | None:
    try:
        mark, _ = watermarks.read_watermark(inv, watermarks.table_at(inv, prefix))
    except (ConfigError, PathError):
        return None
    return None if mark is None else mark.watermark
