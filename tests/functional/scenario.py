"""What the functional scenarios share: one table, ordered by settings, and small helpers over a Host."""

from __future__ import annotations

import uuid

from tests.functional.harness import Host
from turnstile.config.settings import Settings
from turnstile.core.clock import Clock, SystemClock
from turnstile.names.paths import Table
from turnstile.protocol.context import Invocation

TABLE = "ds/tbl"
ORDERED = {"ORDER_PER_TABLE": "true"}


def invocation(host: Host, clock: Clock | None = None) -> Invocation:
    """An operator's or the sweeper's invocation over the host's store and runner."""
    clock = clock or SystemClock()
    return Invocation(
        host.functions_store, host.runner, Settings.from_env(), clock, uuid.uuid4().hex, clock.now()
    )


def table(host: Host) -> Table:
    return Table(host.bucket, TABLE, "ds", "tbl")


def has_backfill(host: Host) -> bool:
    return host.store.inner.stat(f"{TABLE}/_BACKFILL") is not None


def put_all(host: Host, batches: list[str]) -> dict[str, int]:
    """Upload each batch (data, then `_SUCCESS`); return rel -> `_SUCCESS` generation."""
    return {rel: host.put_batch(f"{TABLE}/{rel}") for rel in batches}


def commits_in(generations: dict[str, int], order: list[str]) -> list[tuple[str, int]]:
    return [(rel, generations[rel]) for rel in order]
