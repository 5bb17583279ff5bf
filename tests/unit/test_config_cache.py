"""The function instance's `_config/` cache: storage operations counted at the store port."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from turnstile.config.cascade import ConfigReader
from turnstile.config.config_cache import CachedLevels, ConfigCache, config_level
from turnstile.store.memory import MemoryStore
from turnstile.store.recording import RecordingStore

FOLDER = "sales/orders/2024/05/01/13/"  # 7 levels, the bucket root included
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def store() -> RecordingStore:
    inner = MemoryStore("bkt")
    inner.write("_config/load.json", json.dumps({"max_bad_records": 3}).encode())
    inner.write("sales/orders/_config/ORDERME", b"")
    return RecordingStore(inner)


def _resolve(store: RecordingStore, cache: ConfigCache, at: datetime, max_age: float = 60) -> int:
    reader = ConfigReader(store, CachedLevels(cache, store.bucket, at, max_age))
    resolved = reader.resolve(FOLDER)
    assert resolved.ordered
    return resolved.load.max_bad_records


def test_a_second_invocation_reads_no_config_until_it_ages_out(store: RecordingStore) -> None:
    cache = ConfigCache()
    assert _resolve(store, cache, T0) == 3
    assert store.ops == {"list": 7, "read": 1}
    store.ops.clear()
    assert _resolve(store, cache, T0 + timedelta(seconds=59)) == 3
    assert sum(store.ops.values()) == 0
    assert _resolve(store, cache, T0 + timedelta(seconds=61)) == 3  # the safety net
    assert store.ops == {"list": 7, "read": 1}


def test_a_config_event_refreshes_only_its_level_and_an_already_read_generation_refreshes_nothing(
    store: RecordingStore,
) -> None:
    cache = ConfigCache()
    _resolve(store, cache, T0)
    read = store.inner.stat("_config/load.json")
    assert read is not None
    assert not cache.saw("bkt", "_config/load.json", read.generation)  # the event of what was read
    generation = store.inner.write("_config/load.json", json.dumps({"max_bad_records": 9}).encode())
    assert cache.saw("bkt", "_config/load.json", generation)
    store.ops.clear()
    assert _resolve(store, cache, T0 + timedelta(seconds=1)) == 9
    assert store.ops == {"list": 1, "read": 1}  # the root level only
    assert "" in cache.levels("bkt") and "sales/" in cache.levels("bkt")


def test_max_age_zero_reads_every_level_on_every_invocation(store: RecordingStore) -> None:
    cache = ConfigCache()
    _resolve(store, cache, T0, max_age=0)
    _resolve(store, cache, T0, max_age=0)
    assert store.ops == {"list": 14, "read": 2}
    assert cache.levels("bkt") == set()


@pytest.mark.parametrize(
    ("name", "level"),
    [
        ("_config/load.json", ""),
        ("sales/orders/_config/ORDERME", "sales/orders/"),
        ("sales/_config/old/load.json", "sales/"),
        ("sales/orders/2024/part-0.csv", None),
    ],
)
def test_the_level_of_a_config_object(name: str, level: str | None) -> None:
    assert config_level(name) == level
