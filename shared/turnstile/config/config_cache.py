"""What a function instance remembers of the `_config/` cascade between invocations.

Listing `_config/` at every level of the cascade was most of a batch's storage operations. A
`ConfigCache` keeps each level's reading (bucket and level as key, with the generations of the
config objects it saw) for up to `max_age` seconds. The finalize event of a `_config/` object
carries its name and generation: the instance that receives it forgets that level at once unless
it already read that very generation. Other instances pick the change up when their entry ages
out (a deleted object fires no finalize event either), so `max_age` bounds how stale a config can
be; 0 turns the cache off.

One explicit object per process, created in `turnstile.entrypoints.entry`; nothing else holds config state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from turnstile.names.paths import CONFIG


@dataclass(frozen=True)
class _Entry:
    value: Any
    generations: dict[str, int]  # config object name -> generation read
    read_at: datetime


class ConfigCache:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()  # functions-framework may serve requests on threads

    def get(self, bucket: str, level: str, now: datetime, max_age: float) -> Any | None:
        with self._lock:
            entry = self._entries.get((bucket, level))
        if entry is None or max_age <= 0 or now - entry.read_at > timedelta(seconds=max_age):
            return None
        return entry.value

    def put(self, bucket: str, level: str, value: Any, generations: dict[str, int], now: datetime) -> None:
        with self._lock:
            self._entries[(bucket, level)] = _Entry(value, dict(generations), now)

    def saw(self, bucket: str, name: str, generation: int) -> bool:
        """A `_config/` object was finalized: forget its level unless this generation is the one
        read. True when an entry was dropped."""
        level = config_level(name)
        if level is None:
            return False
        with self._lock:
            entry = self._entries.get((bucket, level))
            if entry is None or entry.generations.get(name) == generation:
                return False
            del self._entries[(bucket, level)]
            return True

    def levels(self, bucket: str) -> set[str]:
        with self._lock:
            return {level for b, level in self._entries if b == bucket}


def config_level(name: str) -> str | None:
    """The cascade level a `_config/` object belongs to: `a/b/_config/load.json` -> `a/b/`;
    None for a name outside any `_config/` folder."""
    marker = f"{CONFIG}/"
    if name.startswith(marker):
        return ""
    at = name.find(f"/{marker}")
    return None if at < 0 else name[: at + 1]


@dataclass(frozen=True)
class CachedLevels:
    """One invocation's view of the cache: its bucket, its clock reading and its settings' age."""

    cache: ConfigCache
    bucket: str
    now: datetime
    max_age: float

    def get(self, level: str) -> Any | None:
        return self.cache.get(self.bucket, level, self.now, self.max_age)

    def put(self, level: str, value: Any, generations: dict[str, int]) -> None:
        if self.max_age > 0:
            self.cache.put(self.bucket, level, value, generations, self.now)
