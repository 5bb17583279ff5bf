"""In-memory object store with GCS generation semantics, thread safe, for simulations and tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import count, islice, takewhile

from sortedcontainers import SortedDict

from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import PreconditionFailed
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject


@dataclass(frozen=True)
class _Entry:
    data: bytes
    generation: int
    updated: datetime


class MemoryStore:
    """One bucket held in a dict. Generations grow across the whole bucket, as GCS's do; stores
    given one `generations` counter never issue the same one (GCS stamps microseconds: a later
    write in any bucket has a larger generation), as a data bucket and its state bucket need.

    `listed_generations=False` makes `list_entries` leave generations out, as S3's listings do, so
    that the protocol's S3 path (a `stat` where a listing lacks a generation) runs here too."""

    def __init__(
        self,
        bucket: str = "memory",
        clock: Clock | None = None,
        *,
        scheme: str = "gs",
        generations: Iterator[int] | None = None,
        listed_generations: bool = True,
    ) -> None:
        self._bucket = bucket
        self._scheme = scheme
        self._listed_generations = listed_generations
        self._clock = clock or SystemClock()
        self._objects: SortedDict[str, _Entry] = SortedDict()
        self._generations = generations if generations is not None else count(1_700_000_000_000_001)
        self._lock = threading.Lock()

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def scheme(self) -> str:
        return self._scheme

    def _found(self, name: str) -> StoredObject | None:
        entry = self._objects.get(name)
        if entry is None:
            return None
        return StoredObject(name, entry.generation, entry.data)

    def _put(self, name: str, data: bytes) -> int:
        generation = next(self._generations)
        self._objects[name] = _Entry(bytes(data), generation, self._clock.now())
        return generation

    def read(self, name: str) -> StoredObject | None:
        with self._lock:
            return self._found(name)

    def stat(self, name: str) -> ObjectInfo | None:
        with self._lock:
            entry = self._objects.get(name)
            return (
                None if entry is None else ObjectInfo(name, entry.generation, len(entry.data), entry.updated)
            )

    def create(self, name: str, data: bytes) -> int:
        with self._lock:
            if name in self._objects:
                raise PreconditionFailed(name, 0, self._found(name))
            return self._put(name, data)

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        with self._lock:
            entry = self._objects.get(name)
            if entry is None or entry.generation != if_generation:
                raise PreconditionFailed(name, if_generation, self._found(name))
            return self._put(name, data)

    def delete(self, name: str, *, if_generation: int) -> None:
        with self._lock:
            entry = self._objects.get(name)
            if entry is None or entry.generation != if_generation:
                raise PreconditionFailed(name, if_generation, self._found(name))
            del self._objects[name]

    def write(self, name: str, data: bytes) -> int:
        with self._lock:
            return self._put(name, data)

    def remove(self, name: str) -> bool:
        with self._lock:
            return self._objects.pop(name, None) is not None

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        with self._lock:
            return [
                ObjectInfo(n, entry.generation, len(entry.data), entry.updated)
                for n, entry in self._range(prefix, start_offset, end_offset, limit)
                if only is None or only(n)
            ]

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        with self._lock:
            return [
                ListedObject(
                    n, len(entry.data), entry.updated, entry.generation if self._listed_generations else None
                )
                for n, entry in self._range(prefix, start_offset, end_offset, limit)
            ]

    def _range(
        self, prefix: str, start_offset: str | None, end_offset: str | None, limit: int | None
    ) -> list[tuple[str, _Entry]]:
        low = max(prefix, start_offset or "")
        # Names sharing a prefix are contiguous in sorted order: stop at the first one past it.
        in_prefix = takewhile(
            lambda n: n.startswith(prefix) and (end_offset is None or n < end_offset),
            self._objects.irange(minimum=low),
        )
        return [(n, self._objects[n]) for n in islice(in_prefix, limit)]

    def list_folders(self, prefix: str) -> list[str]:
        with self._lock:
            folders = []
            low = prefix
            # One seek per folder: past a folder's first name, skip to the first name after it.
            while (name := next(self._objects.irange(minimum=low), None)) is not None:
                if not name.startswith(prefix):
                    break
                head, slash, _ = name[len(prefix) :].partition("/")
                if slash:
                    folders.append(f"{prefix}{head}/")
                    low = f"{prefix}{head}0"  # "0" follows "/": after every name in the folder
                else:
                    low = name + "\0"
            return folders
