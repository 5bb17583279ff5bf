"""Dependency cycles: tables that wait, through their `depends_on`, for themselves.

Followed through the config cascade of each table (`ConfigReader`, cached), for the protocol
(`lineage.check_sources` blocks such a table) and for `turnstile validate`.
"""

from __future__ import annotations

from turnstile.config.cascade import ConfigReader
from turnstile.config.lineage_config import Edge
from turnstile.core.errors import ConfigError

MAX_TABLES = 1000  # tables followed from one table: a guard, far above any real lineage


def _edges(configs: ConfigReader, table: str) -> tuple[Edge, ...] | None:
    try:
        return configs.resolve(f"{table}/", partial=True).load.lineage.depends_on
    except ConfigError:
        return None


def cycle_through(configs: ConfigReader, start: str) -> list[str]:
    """The tables of a path from `start` back to itself through dependencies; empty when none."""
    path: list[str] = [start]
    seen: set[str] = set()

    def walk(table: str) -> bool:
        if len(seen) > MAX_TABLES:
            return False
        for edge in _edges(configs, table) or ():
            if edge.prefix == start:
                path.append(start)
                return True
            if edge.prefix in seen:
                continue
            seen.add(edge.prefix)
            path.append(edge.prefix)
            if walk(edge.prefix):
                return True
            path.pop()
        return False

    return path if walk(start) else []


def describe(cycle: list[str]) -> str:
    return (
        f"a dependency cycle {' -> '.join(cycle)}: no batch of these tables could ever start; remove one "
        "of the dependencies"
    )
