"""The committed-batch ledger read from an Iceberg table metadata document: only the current
snapshot and its ancestors count."""

from __future__ import annotations

from typing import Any

from turnstile.spark.commits import BATCH_KEY, ledger


def snapshot(snapshot_id: int, parent: int | None, key: str | None = None) -> dict[str, Any]:
    summary = {"operation": "append"} | ({BATCH_KEY: key} if key else {})
    found: dict[str, Any] = {"snapshot-id": snapshot_id, "summary": summary}
    if parent is not None:
        found["parent-snapshot-id"] = parent
    return found


def test_the_current_snapshot_and_its_ancestors_only() -> None:
    metadata = {
        "current-snapshot-id": 4,
        "snapshots": [
            snapshot(1, None, "a#1"),
            snapshot(2, 1, "b#1"),
            snapshot(3, 2, "c#1"),  # rolled back: 4's parent is 2
            snapshot(4, 2),  # another writer's commit, untagged
        ],
    }
    assert ledger(metadata, BATCH_KEY) == {"b#1": 2, "a#1": 1}


def test_the_chain_ends_where_a_parent_was_expired() -> None:
    metadata = {"current-snapshot-id": 9, "snapshots": [snapshot(8, 7, "h#1"), snapshot(9, 8, "i#1")]}
    assert ledger(metadata, BATCH_KEY) == {"i#1": 9, "h#1": 8}


def test_a_key_committed_twice_names_the_newest_commit() -> None:
    metadata = {"current-snapshot-id": 2, "snapshots": [snapshot(1, None, "a#1"), snapshot(2, 1, "a#1")]}
    assert ledger(metadata, BATCH_KEY) == {"a#1": 2}


def test_a_table_without_snapshots_has_an_empty_ledger() -> None:
    assert ledger({"current-snapshot-id": -1, "snapshots": []}, BATCH_KEY) == {}
    assert ledger({"current-snapshot-id": None}, BATCH_KEY) == {}
