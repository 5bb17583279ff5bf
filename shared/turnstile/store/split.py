"""An ObjectStore over two buckets: the data bucket, whose events drive the functions, and a state
bucket with no trigger for turnstile's own bookkeeping (STATE_BUCKET; `turnstile.names.placement` says
which object goes where). The protocol sees one store under the data bucket's name.

A deployment switched to a state bucket carries over what its data bucket held (`carried_over`
names: locks, pointers, manifests, records of results, drops and failures, reprocess requests,
pauses), until the state bucket's `MOVED_MARKER` says the data bucket holds none of it. Meanwhile
each such name reads as the state bucket's object when it has one, else as the data bucket's old
copy; a tombstone in the state bucket (`placement.TOMBSTONE`) is a name deleted since. Every change
lands in the state bucket, so each has one point where it takes effect, a precondition there:

- create: the old copy must be absent (or deleted since); then created-if-absent in the state bucket;
- replace or delete of the old copy read at generation G: the old copy must still be G, and the
  state bucket must still have nothing of the name: the new object (or the tombstone) is created
  there if absent, so of two writers that read G one wins, as with one bucket;
- delete of a state-bucket object whose old copy is still in the data bucket: a tombstone, written
  by compare-and-swap.

This holds because after the switch only what was running then writes turnstile's state to the
data bucket (a job's records, names nothing else writes; the old configuration's last invocations:
docs/DEPLOY.md, State bucket), and only the old copies' removal (`store.carryover`) deletes there,
ones the state bucket has hidden for a day. Generations of the same name in the two buckets never
coincide: each bucket gives a later write a larger one (GCS and S3 stamp microseconds; in-memory
stores can share a counter).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable

from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import CLAIM_PREFIX
from turnstile.names.placement import (
    MOVED_MARKER,
    TOMBSTONE,
    carried_over,
    is_state,
    is_tombstone,
    listing_places,
    marker_text,
)
from turnstile.store.port import ListedObject, ObjectInfo, ObjectStore, StoredObject, writable


class MovedBuckets:
    """A process's memory of the data buckets whose state moved to their state bucket for good
    (`placement.MOVED_MARKER`): once moved, always moved, so a function instance asks once."""

    def __init__(self) -> None:
        self._known: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def knows(self, data: str, state: str) -> bool:
        with self._lock:
            return (data, state) in self._known

    def learn(self, data: str, state: str) -> None:
        with self._lock:
            self._known.add((data, state))


class SplitStore:
    def __init__(self, data: ObjectStore, state: ObjectStore, *, moved: MovedBuckets | None = None) -> None:
        if data.bucket == state.bucket:
            raise ValueError(f"the state bucket must not be the data bucket {data.bucket}")
        self.data = data
        self.state = state
        self._moved = moved
        self._carrying: bool | None = None  # None: the state bucket's marker not read yet
        self._in_data: set[str] = set()  # names last found as the data bucket's old copy

    @property
    def bucket(self) -> str:
        return self.data.bucket

    @property
    def scheme(self) -> str:
        return self.data.scheme

    def carries_over(self) -> bool:
        """Whether the data bucket's copies of state objects from before the switch still count:
        until the state bucket's `MOVED_MARKER` names the data bucket (read once per store, and
        once per process with a `MovedBuckets`)."""
        if self._carrying is None:
            memo, pair = self._moved, (self.data.bucket, self.state.bucket)
            if memo is not None and memo.knows(*pair):
                self._carrying = False
            else:
                found = self.state.read(MOVED_MARKER)
                moved = found is not None and marker_text(found.data) == self.data.bucket
                if moved and memo is not None:
                    memo.learn(*pair)
                self._carrying = not moved
        return self._carrying

    def _old(self, name: str) -> bool:
        """Whether the data bucket's old copy of `name` may still count."""
        return carried_over(name) and self.carries_over()

    def can_write(self) -> bool | None:
        """Whether turnstile's own objects can be written: they are what every action writes."""
        return writable(self.state)

    def bucket_of(self, name: str) -> str:
        """The bucket that holds `name`: what a person must open to find it (or a job to read it)."""
        if not is_state(name):
            return self.data.bucket
        unknown = name not in self._in_data and self._old(name)
        if unknown and self.state.stat(name) is None and self.data.stat(name) is not None:
            self._in_data.add(name)
        return self.data.bucket if name in self._in_data else self.state.bucket

    def _found_in(self, name: str, in_data: bool) -> None:
        if in_data:
            self._in_data.add(name)
        else:
            self._in_data.discard(name)

    # --- reads ------------------------------------------------------------------------------
    def read(self, name: str) -> StoredObject | None:
        if not is_state(name):
            return self.data.read(name)
        found = self.state.read(name)
        if found is not None:
            self._found_in(name, False)
            return None if is_tombstone(found.data) else found
        if not self._old(name):
            return None
        old = self.data.read(name)
        self._found_in(name, old is not None)
        return old

    def stat(self, name: str) -> ObjectInfo | None:
        if not is_state(name):
            return self.data.stat(name)
        info, tombstone = self._state_info(name)
        if info is not None:
            self._found_in(name, False)
            return None if tombstone else info
        if not self._old(name):
            return None
        old = self.data.stat(name)
        self._found_in(name, old is not None)
        return old

    def _state_info(self, name: str) -> tuple[ObjectInfo | None, bool]:
        """The state bucket's object of `name` and whether it is a tombstone: a stat, and a read
        when its size says it may be one (both again if it changed in between)."""
        info = self.state.stat(name)
        for _ in range(3):
            if info is None or info.size != len(TOMBSTONE):
                return info, False
            found = self.state.read(name)
            if found is not None and found.generation == info.generation:
                return info, is_tombstone(found.data)
            info = self.state.stat(name)
        return info, False

    def _is_tombstone(self, info: ObjectInfo) -> bool:
        """A state-bucket object is a tombstone: its size says it may be, its bytes say so (a
        listing's entry changed since it was listed is not: the listing is older than the change)."""
        if info.size != len(TOMBSTONE):
            return False
        found = self.state.read(info.name)
        return found is not None and found.generation == info.generation and is_tombstone(found.data)

    def _conflict(self, name: str, expected: int) -> PreconditionFailed:
        """The precondition failed: what the name holds now, as the protocol sees it."""
        return PreconditionFailed(name, expected, self.read(name))

    # --- writes -----------------------------------------------------------------------------
    def create(self, name: str, data: bytes) -> int:
        if not is_state(name):
            return self.data.create(name, data)
        if self._old(name) and self.data.stat(name) is not None:
            current = self.read(name)  # the old copy, unless the state bucket has the name
            if current is not None:
                raise PreconditionFailed(name, 0, current)
        try:
            generation = self.state.create(name, data)
        except PreconditionFailed as conflict:
            there = conflict.found
            if there is None or not is_tombstone(there.data):
                raise PreconditionFailed(name, 0, there) from None
            try:  # deleted since the switch: created again over its tombstone
                generation = self.state.replace(name, data, if_generation=there.generation)
            except PreconditionFailed:
                raise self._conflict(name, 0) from None
        self._found_in(name, False)
        return generation

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        if not is_state(name):
            return self.data.replace(name, data, if_generation=if_generation)
        try:
            generation = self.state.replace(name, data, if_generation=if_generation)
        except PreconditionFailed as conflict:
            if conflict.found is not None or not self._old(name):
                raise self._conflict(name, if_generation) from None
            generation = self._take_over(name, data, if_generation)
        self._found_in(name, False)
        return generation

    def _take_over(self, name: str, data: bytes, generation: int) -> int:
        """Change the old copy read at `generation`: create `data` in the state bucket, which has
        nothing of the name yet (whoever creates it first wins; the old copy is hidden from then)."""
        old = self.data.stat(name)
        if old is None or old.generation != generation:
            raise self._conflict(name, generation)
        try:
            return self.state.create(name, data)
        except PreconditionFailed:
            raise self._conflict(name, generation) from None

    def delete(self, name: str, *, if_generation: int) -> None:
        if not is_state(name):
            self.data.delete(name, if_generation=if_generation)
            return
        if not self._old(name):
            self.state.delete(name, if_generation=if_generation)
            return
        info = self.state.stat(name)
        if info is None:
            self._take_over(name, TOMBSTONE, if_generation)
            return
        if info.generation != if_generation:  # a tombstone's generation is never one read
            raise self._conflict(name, if_generation)
        try:
            if self.data.stat(name) is not None:  # its old copy would count again: a tombstone
                self.state.replace(name, TOMBSTONE, if_generation=if_generation)
            else:
                self.state.delete(name, if_generation=if_generation)
        except PreconditionFailed:
            raise self._conflict(name, if_generation) from None

    def write(self, name: str, data: bytes) -> int:
        if not is_state(name):
            return self.data.write(name, data)
        generation = self.state.write(name, data)
        self._found_in(name, False)
        return generation

    def remove(self, name: str) -> bool:
        if not is_state(name):
            return self.data.remove(name)
        if not self._old(name):
            return self.state.remove(name)
        existed = self.stat(name) is not None
        if self.data.stat(name) is not None:
            self.state.write(name, TOMBSTONE)
        else:
            self.state.remove(name)
        return existed

    # --- listings ---------------------------------------------------------------------------
    def _with_old(self, prefix: str) -> bool:
        """A listing of `prefix` must read the data bucket's old copies too."""
        places = listing_places(prefix)
        if not places.state or prefix.rpartition("/")[2].startswith(CLAIM_PREFIX):
            return False
        return self.carries_over()

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
        not turnstile's: each bucket answers only for the names it holds, except the old copies
        the data bucket holds from before the switch while they still count."""
        if self._with_old(prefix):
            return self._list_with_old(prefix, start_offset, end_offset, limit, only)
        places = listing_places(prefix)
        listings = []
        for store, wanted in ((self.data, places.data), (self.state, places.state)):
            if not wanted:
                continue
            listed = store.list_objects(
                prefix, start_offset=start_offset, end_offset=end_offset, limit=limit, only=only
            )
            in_state = store is self.state
            listings.append(
                [
                    info
                    for info in listed
                    if in_state == is_state(info.name) and not (in_state and self._is_tombstone(info))
                ]
            )
        merged = list(heapq.merge(*listings, key=lambda info: info.name))
        return merged if limit is None else merged[:limit]

    def _list_with_old(
        self,
        prefix: str,
        start_offset: str | None,
        end_offset: str | None,
        limit: int | None,
        only: Callable[[str], bool] | None,
    ) -> list[ObjectInfo]:
        """Both buckets, page by page: a state-bucket object hides the old copy of its name, a
        tombstone hides both, so a page may hold fewer than `limit` visible names."""
        data_wanted = listing_places(prefix).data
        page = limit if only is None else None  # `only` filters after the limit: list it all
        found: list[ObjectInfo] = []
        start = start_offset
        while True:
            fresh, kept = (
                store.list_objects(prefix, start_offset=start, end_offset=end_offset, limit=page, only=only)
                for store in (self.state, self.data)
            )
            full = [listed[-1].name for listed in (fresh, kept) if page is not None and len(listed) == page]
            bound = min(full) if full else None  # past it, a full page may have missed names
            names: dict[str, tuple[ObjectInfo, bool] | None] = {}  # name -> (info, an old copy)
            for info in kept:
                if bound is not None and info.name > bound:
                    break
                if (data_wanted and not is_state(info.name)) or carried_over(info.name):
                    names[info.name] = (info, is_state(info.name))
            for info in fresh:
                if bound is not None and info.name > bound:
                    break
                if is_state(info.name):
                    names[info.name] = None if self._is_tombstone(info) else (info, False)
            for name in sorted(names):
                if (entry := names[name]) is None:
                    continue
                info, old = entry
                if is_state(name):
                    self._found_in(name, old)
                found.append(info)
            if bound is None or (limit is not None and len(found) >= limit):
                return found if limit is None else found[:limit]
            start = bound + "\x00"  # the first name after the bound

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        """As `list_objects`, without generations where the buckets' listings lack them. While the
        data bucket's old copies count, the listing that merges them (`list_objects`'s) is taken."""
        if self._with_old(prefix):
            listed = self._list_with_old(prefix, start_offset, end_offset, limit, None)
            return [ListedObject(i.name, i.size, i.updated, i.generation) for i in listed]
        places = listing_places(prefix)
        listings = []
        for store, wanted in ((self.data, places.data), (self.state, places.state)):
            if not wanted:
                continue
            entries = store.list_entries(
                prefix, start_offset=start_offset, end_offset=end_offset, limit=limit
            )
            in_state = store is self.state
            listings.append(
                [
                    entry
                    for entry in entries
                    if in_state == is_state(entry.name) and not (in_state and self._is_tombstone_entry(entry))
                ]
            )
        merged = list(heapq.merge(*listings, key=lambda entry: entry.name))
        return merged if limit is None else merged[:limit]

    def _is_tombstone_entry(self, entry: ListedObject) -> bool:
        """`_is_tombstone` for a listing's entry, whose generation S3 does not give."""
        if entry.size != len(TOMBSTONE):
            return False
        found = self.state.read(entry.name)
        same = entry.generation is None or (found is not None and found.generation == entry.generation)
        return found is not None and same and is_tombstone(found.data)

    def list_folders(self, prefix: str) -> list[str]:
        stores = [self.data] if listing_places(prefix).data or self._with_old(prefix) else []
        if listing_places(prefix).state:
            stores.append(self.state)
        return sorted({folder for store in stores for folder in store.list_folders(prefix)})
