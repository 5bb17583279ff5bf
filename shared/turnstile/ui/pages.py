"""What each page shows, read through the ops layer as `turnstile status`, `history` and `explain`
read it: the tables and the lineage graph from the console's last reading of every table
(`snapshot`), one table afresh."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from turnstile.config.cascade import ConfigReader
from turnstile.core.errors import ConfigError
from turnstile.names.paths import Table
from turnstile.ops import history as history_ops
from turnstile.ops import lineage_graph, timeline
from turnstile.ops import status as status_ops
from turnstile.ops.history import History
from turnstile.ops.status import Health, TableStatus
from turnstile.protocol import lineage
from turnstile.protocol.context import Invocation
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import Lock
from turnstile.store.port import object_uri
from turnstile.ui import graph as graph_layout
from turnstile.ui import timeline as timeline_layout
from turnstile.ui.context import Console
from turnstile.ui.snapshot import Partial, Reading, Snapshot

HISTORY_PAGE = 50
SEVERITY = {health: index for index, health in enumerate(Health)}  # worst first, as Health lists them


# -- the tables ------------------------------------------------------------------------------------


def lag_of(s: TableStatus) -> float | None:
    """How far the table is behind: its watermark's lag when it has one, else its last commit's."""
    return s.watermark_lag_seconds if s.watermark is not None else s.last_commit_lag_seconds


def held_for(s: TableStatus) -> float | None:
    """How long the lock has held the table (None for a FREE one: it holds nothing)."""
    return s.lock.age_seconds if s.lock is not None and s.lock.state != "FREE" else None


def _none_last(value: Any) -> tuple[bool, Any]:
    return (value is None, value)


SORTS: dict[str, Callable[[TableStatus], Any]] = {
    "table": lambda s: s.table,
    "health": lambda s: SEVERITY[s.health],
    "backlog": lambda s: s.backlog_depth,
    "head": lambda s: _none_last(s.backlog_head),
    "lock": lambda s: s.lock.state if s.lock else "",
    "lock_age": lambda s: _none_last(held_for(s)),
    "last_applied": lambda s: _none_last(s.last_applied),
    "watermark": lambda s: _none_last(s.watermark),
    "lag": lambda s: _none_last(lag_of(s)),
    "oldest": lambda s: _none_last(s.oldest_pending_age_seconds),
}
# Clicking a column first shows what needs a look first: the worst, the longest, the oldest.
DESCENDING_FIRST = {"backlog", "lock_age", "lag", "oldest"}
COLUMNS = (
    ("table", "Table"),
    ("health", "Health"),
    ("backlog", "Backlog"),
    ("head", "Head"),
    ("lock", "Lock"),
    ("lock_age", "Lock age"),
    ("last_applied", "Last applied"),
    ("watermark", "Watermark"),
    ("lag", "Lag"),
    ("oldest", "Oldest pending"),
)


@dataclass(frozen=True)
class TablesQuery:
    sort: str = "health"
    descending: bool = False
    text: str = ""  # part of the table's name
    health: str = ""  # "" all, "problems", or one Health

    @classmethod
    def of(cls, params: dict[str, str]) -> TablesQuery:
        sort = params.get("sort", "health")
        return cls(
            sort=sort if sort in SORTS else "health",
            descending=params.get("desc") == "1",
            text=params.get("q", "").strip(),
            health=params.get("health", ""),
        )

    def keeps(self, s: TableStatus) -> bool:
        if self.text and self.text.lower() not in s.table.lower():
            return False
        if self.health == "problems":
            return s.health.is_problem or s.health in (Health.STALLED, Health.RETRYING)
        return not self.health or s.health.value == self.health

    def link(self, sort: str) -> dict[str, str]:
        """The query of a column header's link: that column, or the other way round if it is this one."""
        descending = (not self.descending) if sort == self.sort else sort in DESCENDING_FIRST
        return {"sort": sort, "desc": "1" if descending else "0", "q": self.text, "health": self.health}


@dataclass(frozen=True)
class TablesPage:
    rows: tuple[TableStatus, ...]
    total: int
    counts: dict[str, int]  # per health, over every table
    query: TablesQuery
    read_at: datetime | None  # when the reading shown began
    age_seconds: float  # how long ago
    reading_seconds: float  # how long the reading took
    every_seconds: float  # how often the tables are read
    # The first reading (or one after the last grew too old) not done: how far it has got; `rows`
    # are the tables it has read, `read_at` is None, the ages are the reading's so far.
    progress: Partial | None = None


def read_all(console: Console, progress: status_ops.Progress | None = None) -> Reading:
    """Every table's status and the lineage graph, from one reading of the bucket (`Snapshot`);
    `progress` hears of each table as it is read."""
    inv = console.invocation()
    read_at = inv.clock.now()
    if console.one_listing:
        inv = status_ops.prefix_listing(inv, console.prefix)
    found = status_ops.statuses(inv, console.prefix, {}, workers=console.workers, progress=progress)
    return Reading(tuple(found), lineage_graph.graph(inv, found), read_at, 0.0, 0.0, inv.configs)


def tables(snapshot: Snapshot, query: TablesQuery) -> TablesPage:
    reading = snapshot.current()
    found = reading.statuses
    counts: dict[str, int] = {}
    for s in found:
        counts[s.health.value] = counts.get(s.health.value, 0) + 1
    kept = sorted((s for s in found if query.keeps(s)), key=lambda s: s.table)
    kept.sort(key=SORTS[query.sort], reverse=query.descending)
    if isinstance(reading, Partial):
        age = reading.age()
        return TablesPage(tuple(kept), len(found), counts, query, None, age, age, snapshot.every, reading)
    return TablesPage(
        tuple(kept),
        len(found),
        counts,
        query,
        reading.read_at,
        reading.age(),
        reading.seconds,
        snapshot.every,
    )


# -- one table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigView:
    resolved: str | None  # load.json as the cascade merges it, as JSON
    sources: tuple[tuple[str, str], ...]  # (URI, text) of each `_config/` file in force, farthest first
    transform: str | None
    ordered: bool
    error: str | None


@dataclass(frozen=True)
class TablePage:
    table: Table
    status: TableStatus
    history: History
    page: int
    pages: int
    drawing: timeline_layout.Drawing
    config: ConfigView
    dependents: tuple[str, ...]
    read_at: datetime
    commands: dict[str, str] = field(default_factory=dict)  # what to run, as `status` prints it


def table(console: Console, table: Table, page: int = 1, configs: ConfigReader | None = None) -> TablePage:
    """The table's objects read afresh: one listing of its state objects serves its status, its
    history and its dependents (`status_ops.listed`; on an emulator one listing of the table's
    folder, which serves the timeline's arrivals too). `configs`: the `_config/` levels of the
    tables page's reading, younger than its bound, reused for those above the table's folder (its
    own are read again)."""
    inv = console.invocation()
    if configs is not None:
        inv.configs = configs
    inv = status_ops.prefix_listing(inv, table.prefix) if console.one_listing else inv
    inv = status_ops.listed(inv, f"{table.prefix}/_")
    status = status_ops.table_status(inv, table)
    success = console.settings.success_filename
    first = history_ops.history(inv.store, table, success_filename=success, last=HISTORY_PAGE)
    pages = max(1, -(-first.total // HISTORY_PAGE))
    page = min(max(page, 1), pages)
    found = first
    if page > 1:
        found = history_ops.history(
            inv.store,
            table,
            success_filename=success,
            last=HISTORY_PAGE,
            offset=(page - 1) * HISTORY_PAGE,
        )
    lock = _lock(inv, table)
    spans = timeline.spans(inv, table, found.entries, lock if page == 1 else None)
    where = status.uri
    commands = {
        "status": f"turnstile status {where}",
        "history": f"turnstile history {where}",
    }
    if status.lock is not None and status.lock.unlock_command:
        commands["unlock"] = status.lock.unlock_command
        for choice in status.lock.unlock_options:
            commands[f"unlock {choice.option}"] = f"{status.lock.unlock_command} {choice.option}"
    if status.lock is not None and status.lock.publish_command:
        commands["publish"] = status.lock.publish_command
    try:
        dependents = tuple(lineage.dependents(inv, table))
    except ConfigError:
        dependents = ()
    return TablePage(
        table=table,
        status=status,
        history=found,
        page=page,
        pages=pages,
        drawing=timeline_layout.draw(spans, inv.clock.now()),
        config=_config(console, inv.configs, table),
        dependents=dependents,
        read_at=inv.clock.now(),
        commands=commands,
    )


def _lock(inv: Invocation, table: Table) -> Lock | None:
    try:
        held, _ = read_lock(inv, table)
    except ConfigError:
        return None
    return held


def _config(console: Console, reader: ConfigReader, table: Table) -> ConfigView:
    """load.json as the cascade resolves it for the table's folder (a batch folder's own `_config/`
    may still override it), with the files it comes from."""
    try:
        resolved = reader.resolve(f"{table.prefix}/", partial=True)
    except ConfigError as exc:
        return ConfigView(None, (), None, False, str(exc))
    sources = []
    for name in resolved.sources:
        found = console.store.read(name)
        text = found.data.decode("utf-8", "replace") if found is not None else "(deleted since listed)"
        sources.append((object_uri(console.store, name), text))
    merged = resolved.load.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return ConfigView(
        json.dumps(merged, indent=2, sort_keys=True, ensure_ascii=False),
        tuple(sources),
        resolved.transform_sql,
        resolved.ordered or console.settings.order_per_table,
        None,
    )


# -- lineage ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineagePage:
    layout: graph_layout.Layout
    graph: lineage_graph.Graph
    read_at: datetime
    age_seconds: float


def lineage_page(snapshot: Snapshot) -> LineagePage | Partial:
    """The graph of the last reading; how far the reading has got while none is young enough (the
    graph is drawn from every table: none before they are all read)."""
    reading = snapshot.current()
    if isinstance(reading, Partial):
        return reading
    return LineagePage(graph_layout.layout(reading.graph), reading.graph, reading.read_at, reading.age())
