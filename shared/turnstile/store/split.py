"""An ObjectStore over two buckets: the data bucket, whose events drive the functions, and a state
bucket with no trigger for turnstile's own bookkeeping (STATE_BUCKET; `turnstile.placement` says
which object goes where). The protocol sees one store under the data bucket's name."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from turnstile.placement import is_state, listing_places
from turnstile.store.port import ListedObject, ObjectInfo, ObjectStore, StoredObject


class SplitStore:
    def __init__(self, data: ObjectStore, state: ObjectStore) -> None:
        if data.bucket == state.bucket:
            raise ValueError(f"the state bucket must not be the data bucket {data.bucket}")
        self.data = data
        self.state = state

    @property
    def bucket(self) -> str:
        return self.data.bucket

    @property
    def scheme(self) -> str:
        return self.data.scheme

    def bucket_of(self, name: str) -> str:
        """The bucket that holds `name`: what a person must open to find it."""
        return self._of(name).bucket

    def _of(self, name: str) -> ObjectStore:
        return self.state if is_state(name) else self.data

    def read(self, name: str) -> StoredObject | None:
        return self._of(name).read(name)

    def stat(self, name: str) -> ObjectInfo | None:
        return self._of(name).stat(name)

    def create(self, name: str, data: bytes) -> int:
        return self._of(name).create(name, data)

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        return self._of(name).replace(name, data, if_generation=if_generation)

    def delete(self, name: str, *, if_generation: int) -> None:
        self._of(name).delete(name, if_generation=if_generation)

    def write(self, name: str, data: bytes) -> int:
        return self._of(name).write(name, data)

    def remove(self, name: str) -> bool:
        return self._of(name).remove(name)

    def _stores(self, prefix: str) -> list[ObjectStore]:
        places = listing_places(prefix)
        return [store for store, wanted in ((self.data, places.data), (self.state, places.state)) if wanted]

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        """One listing where the prefix says which bucket; else both, merged in name order. An
        object of the wrong kind for its bucket (a pointer copied into the data bucket by hand) is
        not turnstile's: each bucket answers only for the names it holds."""
        listings = [
            [
                info
                for info in store.list_objects(
                    prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
                )
                if (store is self.state) == is_state(info.name)
            ]
            for store in self._stores(prefix)
        ]
        merged = list(heapq.merge(*listings, key=lambda info: info.name))
        return merged if limit is None else merged[:limit]

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        """As `list_objects`, without generations where the buckets' listings lack them."""
        listings = [
            [
                entry
                for entry in store.list_entries(
                    prefix, start_offset=start_offset, end_offset=end_offset, limit=limit
                )
                if (store is self.state) == is_state(entry.name)
            ]
            for store in self._stores(prefix)
        ]
        merged = list(heapq.merge(*listings, key=lambda entry: entry.name))
        return merged if limit is None else merged[:limit]

    def list_folders(self, prefix: str) -> list[str]:
        return sorted({folder for store in self._stores(prefix) for folder in store.list_folders(prefix)})
