"""An ObjectStore decorator that records every finalized write and counts every operation.

Writes are what fire `object.finalized` events, so the recorded (name, generation) pairs are the
events a bucket would emit; the counts are the storage-operation cost figure of the benchmarks.
Used by the local event bridge, the simulation, the benchmark and the tests.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from turnstile.core.errors import PreconditionFailed
from turnstile.store.port import ListedObject, ObjectInfo, ObjectStore, StoredObject

Listener = Callable[[str, int], None]
T = TypeVar("T")
OperationHook = Callable[[str, bool], None]  # (operation, its precondition failed)


class RecordingStore:
    def __init__(
        self,
        inner: ObjectStore,
        on_finalized: Listener | None = None,
        *,
        on_operation: OperationHook | None = None,
    ) -> None:
        self.inner = inner
        self.ops: Counter[str] = Counter()
        self._on_finalized = on_finalized
        self._on_operation = on_operation
        self._lock = threading.Lock()

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def scheme(self) -> str:
        return self.inner.scheme

    def _count(self, op: str, conflict: bool = False) -> None:
        with self._lock:
            self.ops[op] += 1
        if self._on_operation is not None:
            self._on_operation(op, conflict)

    def _conditional(self, op: str, action: Callable[[], T]) -> T:
        try:
            result = action()
        except PreconditionFailed:
            self._count(op, conflict=True)
            raise
        self._count(op)
        return result

    def _landed(self, op: str, name: str, write: Callable[[], int]) -> int:
        generation = self._conditional(op, write)
        if self._on_finalized is not None:
            self._on_finalized(name, generation)
        return generation

    def read(self, name: str) -> StoredObject | None:
        self._count("read")
        return self.inner.read(name)

    def stat(self, name: str) -> ObjectInfo | None:
        self._count("stat")
        return self.inner.stat(name)

    def create(self, name: str, data: bytes) -> int:
        return self._landed("create", name, lambda: self.inner.create(name, data))

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        return self._landed(
            "replace", name, lambda: self.inner.replace(name, data, if_generation=if_generation)
        )

    def write(self, name: str, data: bytes) -> int:
        return self._landed("write", name, lambda: self.inner.write(name, data))

    def delete(self, name: str, *, if_generation: int) -> None:
        self._conditional("delete", lambda: self.inner.delete(name, if_generation=if_generation))

    def remove(self, name: str) -> bool:
        self._count("remove")
        return self.inner.remove(name)

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        self._count("list")
        return self.inner.list_objects(
            prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
        )

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        self._count("list")
        return self.inner.list_entries(prefix, start_offset=start_offset, end_offset=end_offset, limit=limit)

    def list_folders(self, prefix: str) -> list[str]:
        self._count("list")
        return self.inner.list_folders(prefix)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.ops.values())
