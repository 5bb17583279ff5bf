"""The object store port: the few operations the ordering protocol needs, all generation-aware.

Generations follow GCS: every write of a name gets a new, larger generation; generation 0 in a
precondition means "the object must not exist".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ObjectInfo:
    """Metadata of one object, as listings return it."""

    name: str
    generation: int
    size: int
    updated: datetime


@dataclass(frozen=True)
class ListedObject:
    """An object as one listing request names it, without a request per object: its name, size and
    time of last write, and its generation where the store's listing carries it (GCS, the
    in-memory store); None where it does not (S3): `stat` the names whose generation is needed."""

    name: str
    size: int
    updated: datetime
    generation: int | None = None


@dataclass(frozen=True)
class StoredObject:
    """An object's bytes together with the generation they belong to."""

    name: str
    generation: int
    data: bytes

    def text(self) -> str:
        return self.data.decode("utf-8")


class ObjectStore(Protocol):
    """One bucket. Every method raises `StoreUnavailable` when the store cannot be reached."""

    @property
    def bucket(self) -> str: ...

    @property
    def scheme(self) -> str:
        """URI scheme of the store's objects: `gs` (GCS, and the in-memory store by default) or `s3`."""

    def read(self, name: str) -> StoredObject | None:
        """The object's bytes and generation, or None when absent."""

    def stat(self, name: str) -> ObjectInfo | None:
        """The object's metadata without its bytes, or None when absent."""

    def create(self, name: str, data: bytes) -> int:
        """Write only if absent; return the new generation. Raises `PreconditionFailed`."""

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        """Compare-and-swap: write only if the live generation is `if_generation`.

        Returns the new generation. Raises `PreconditionFailed` (also when the object is absent).
        """

    def delete(self, name: str, *, if_generation: int) -> None:
        """Delete only if the live generation is `if_generation`. Raises `PreconditionFailed`."""

    def write(self, name: str, data: bytes) -> int:
        """Unconditional write, for objects nobody races on. Returns the new generation."""

    def remove(self, name: str) -> bool:
        """Unconditional delete; False when the object was already absent."""

    def list_objects(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> list[ObjectInfo]:
        """Objects under `prefix` in lexicographic name order, each with its generation.

        `start_offset` (inclusive), `end_offset` (exclusive) and `limit` let a caller read the head
        or a range of a long listing without paging through all of it. `only` keeps the names it
        accepts (`limit` bounds the listing before it): on S3 the generation of each object kept
        takes a request of its own, so a caller that needs a few names of a long range says which,
        and a caller that needs no generation lists with `list_entries`.
        """

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        """What `list_objects` lists, as the store's listing requests alone give it: no request per
        object on any store, the generation only where the listing carries it (not on S3)."""

    def list_folders(self, prefix: str) -> list[str]:
        """The immediate sub-folders of `prefix` (each ending in "/"), lexicographically."""


@runtime_checkable
class PlacedStore(Protocol):
    """A store over more than one bucket (`store.split`): it says which bucket holds a name."""

    def bucket_of(self, name: str) -> str: ...


@runtime_checkable
class WriteCheck(Protocol):
    """A store that can tell, writing nothing, whether its credentials may write (the console
    starts read-only when they may not)."""

    def can_write(self) -> bool | None:
        """True or False when the store could tell; None when it could not (an emulator, an API
        the credentials may not call)."""


def writable(store: ObjectStore) -> bool | None:
    """`WriteCheck.can_write` of a store that has it; None for one that has not."""
    return store.can_write() if isinstance(store, WriteCheck) else None


def object_uri(store: ObjectStore, name: str) -> str:
    """`gs://bucket/name` or `s3://bucket/name`: how jobs and people address an object of `store`."""
    # Not isinstance(store, PlacedStore): a runtime protocol check costs more than the rest of it.
    placed = getattr(store, "bucket_of", None)
    bucket = placed(name) if placed is not None else store.bucket
    return f"{store.scheme}://{bucket}/{name}"
