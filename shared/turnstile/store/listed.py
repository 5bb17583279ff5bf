"""A read-only view of a store whose listings and stats below one prefix come from one listing
made up front: `turnstile status` and the console read a table (or every table of a folder) with
one list request instead of one per folder they look into, and stat nothing.

Below the listed prefix, `list_objects`, `list_folders` and `stat` answer from the listing, and a
`read` of a name the listing does not hold answers None without a request (the object did not
exist when listed). Reads of listed objects, and everything outside the prefix, go to the store.
A view is a snapshot for one reading: it refuses every write, so nothing it shows can drive one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from turnstile.store.port import ListedObject, ObjectInfo, ObjectStore, StoredObject


class ReadOnlyView(RuntimeError):
    """A write through a listed view: a bug (actions read the bucket afresh and write through it)."""


class ListedStore:
    def __init__(self, inner: ObjectStore, prefix: str, listing: list[ObjectInfo]) -> None:
        self.inner = inner
        self.prefix = prefix
        self._infos = sorted(listing, key=lambda i: i.name)
        self._names = [i.name for i in self._infos]
        self._by_name = {i.name: i for i in self._infos}

    @classmethod
    def of(cls, inner: ObjectStore, prefix: str) -> ListedStore:
        """One listing of `prefix` (paged by the store as it needs)."""
        return cls(inner, prefix, inner.list_objects(prefix))

    @property
    def bucket(self) -> str:
        return self.inner.bucket

    @property
    def scheme(self) -> str:
        return self.inner.scheme

    def bucket_of(self, name: str) -> str:
        placed = getattr(self.inner, "bucket_of", None)
        return placed(name) if placed is not None else self.inner.bucket

    def covers(self, name: str) -> bool:
        return name.startswith(self.prefix)

    def read(self, name: str) -> StoredObject | None:
        if self.covers(name) and name not in self._by_name:
            return None
        return self.inner.read(name)

    def stat(self, name: str) -> ObjectInfo | None:
        return self._by_name.get(name) if self.covers(name) else self.inner.stat(name)

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        if not self.covers(prefix):
            return self.inner.list_objects(
                prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
            )
        start = max(prefix, start_offset) if start_offset is not None else prefix
        found: list[ObjectInfo] = []
        for info in self._infos[bisect_left(self._names, start) :]:
            if not info.name.startswith(prefix) or (end_offset is not None and info.name >= end_offset):
                break
            if limit is not None and len(found) >= limit:
                break
            found.append(info)
        return found if only is None else [i for i in found if only(i.name)]

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        if not self.covers(prefix):
            ranged = {"start_offset": start_offset, "end_offset": end_offset}
            return self.inner.list_entries(prefix, **ranged, limit=limit)
        listed = self.list_objects(prefix, start_offset=start_offset, end_offset=end_offset, limit=limit)
        return [ListedObject(i.name, i.size, i.updated, i.generation) for i in listed]

    def list_folders(self, prefix: str) -> list[str]:
        if not self.covers(prefix):
            return self.inner.list_folders(prefix)
        folders: set[str] = set()
        index = bisect_left(self._names, prefix)
        while index < len(self._names) and self._names[index].startswith(prefix):
            below, slash, _ = self._names[index][len(prefix) :].partition("/")
            if not slash:
                index += 1
                continue
            folder = f"{prefix}{below}/"
            folders.add(folder)
            index = bisect_left(self._names, f"{folder}\U0010ffff")  # past the folder's objects
        return sorted(folders)

    def _refuse(self, name: str) -> ReadOnlyView:
        return ReadOnlyView(f"{name}: a listed view of the bucket is read-only; write through the store")

    def create(self, name: str, data: bytes) -> int:
        raise self._refuse(name)

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        raise self._refuse(name)

    def delete(self, name: str, *, if_generation: int) -> None:
        raise self._refuse(name)

    def write(self, name: str, data: bytes) -> int:
        raise self._refuse(name)

    def remove(self, name: str) -> bool:
        raise self._refuse(name)
