"""Moving a switched deployment's old state objects out of its data bucket, so that the split store
stops reading the data bucket for them (`placement.MOVED_MARKER`). Nothing depends on it for
correctness: until it is done, the split store reads the old copies where they are.

A pass over a table's old copies (and the bucket's own `_turnstile/`):
- an old copy the state bucket has hidden for `settled` (by its own object, or a tombstone) is
  deleted;
- an old copy that has not changed for `settled` is copied into the state bucket (created if
  absent: a change made there meanwhile wins), and deleted by a later pass; except the backlog
  pointers, reprocess requests and open-job markers, whose generations a lock or a running job
  holds (a copy has another generation): they go when the protocol deletes them, once applied;
- a tombstone `settled` old whose old copy is gone is deleted, as is a table's claim left in the data
  bucket (claims are not carried over: they only spared a duplicate event's work).
`settled` (a day) is far longer than any read-then-write of the split store takes, so nothing in
the middle of one sees a copy go. A pass that leaves nothing in the data bucket and no tombstone
moves the bucket: it writes `MOVED_MARKER`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import BACKLOG, CLAIM_PREFIX, INTERNAL, LOCK
from turnstile.names.placement import MOVED_MARKER, TOMBSTONE, carried_over, is_tombstone
from turnstile.store.port import ObjectInfo
from turnstile.store.split import SplitStore

SETTLED = timedelta(days=1)
HELD = (f"/{BACKLOG}/", f"{INTERNAL}/reprocess/", f"{INTERNAL}/open/")  # their generations are held


class Step(StrEnum):
    COPY = "copy"  # into the state bucket
    REMOVE = "remove"  # the old copy, hidden by the state bucket
    FORGET = "forget"  # a tombstone whose old copy is gone


class Wait(StrEnum):
    RECENT = "changed less than a day ago"
    HIDDEN_RECENTLY = "hidden by the state bucket less than a day ago"
    IN_USE = "goes when it is applied, dropped or ended"


@dataclass
class Pass:
    """What a pass did (or, dry, would do), and what it left for a later one."""

    done: list[tuple[Step, str]] = field(default_factory=list)
    waiting: list[tuple[str, Wait]] = field(default_factory=list)
    left: int = 0  # old copies and tombstones the budget left for the next pass
    moved: bool = False  # nothing was left: the marker is written (or would be)


def copyable(name: str) -> bool:
    """An old copy the pass may copy: not one whose generation a lock or a running job holds."""
    return carried_over(name) and not any(held in name for held in HELD)


def prefixes(table_prefix: str) -> list[str]:
    """Where a table's state objects are (listing prefixes; its lock is one name)."""
    return [f"{table_prefix}/{BACKLOG}/", f"{table_prefix}/{INTERNAL}/"]


def move(
    store: SplitStore,
    tables: Iterable[str],
    now: datetime,
    *,
    dry_run: bool = False,
    budget: int | None = None,
    settled: timedelta = SETTLED,
) -> Pass:
    """One pass over the old copies of `tables` (table prefixes) and of the bucket's own
    `_turnstile/`, at most `budget` steps. A pass that finds nothing at all (no old copy, no
    tombstone) writes the marker: the data bucket is not read for state any more."""
    done = Pass()
    for old, fresh in _candidates(store, tables):
        _move_one(store, old, fresh, now, done, dry_run=dry_run, budget=budget, settled=settled)
    done.moved = not (done.done or done.waiting or done.left)
    if done.moved and not dry_run:
        store.state.write(MOVED_MARKER, store.data.bucket.encode())
    return done


def _candidates(
    store: SplitStore, tables: Iterable[str]
) -> Iterable[tuple[ObjectInfo | None, ObjectInfo | None]]:
    """(old copy, state bucket's object) of every name that has an old copy or a tombstone."""
    for table in [None, *tables]:
        old: dict[str, ObjectInfo] = {}
        fresh: dict[str, ObjectInfo] = {}
        for prefix in [f"{INTERNAL}/"] if table is None else prefixes(table):
            old |= {info.name: info for info in store.data.list_objects(prefix, only=carried_over)}
            fresh |= {info.name: info for info in store.state.list_objects(prefix, only=carried_over)}
        if table is not None:  # the claims of `_BACKFILL` events before the switch count no more
            old |= {info.name: info for info in store.data.list_objects(f"{table}/{CLAIM_PREFIX}")}
        if table is not None:  # the lock: one name
            for bucket, into in ((store.data, old), (store.state, fresh)):
                if (found := bucket.stat(f"{table}/{LOCK}")) is not None:
                    into[found.name] = found
        for name in sorted(old.keys() | fresh.keys()):
            there = fresh.get(name)
            if name in old or (there is not None and _tombstone(store, there)):
                yield old.get(name), there


def _tombstone(store: SplitStore, info: ObjectInfo) -> bool:
    if info.size != len(TOMBSTONE):
        return False
    found = store.state.read(info.name)
    return found is not None and is_tombstone(found.data)


def _spent(done: Pass, budget: int | None) -> bool:
    return budget is not None and len(done.done) >= budget


def _move_one(
    store: SplitStore,
    old: ObjectInfo | None,
    fresh: ObjectInfo | None,
    now: datetime,
    done: Pass,
    *,
    dry_run: bool,
    budget: int | None,
    settled: timedelta,
) -> None:
    if old is None:  # a tombstone whose old copy is gone
        assert fresh is not None
        _step(store, Step.FORGET, fresh, now, done, dry_run=dry_run, budget=budget, settled=settled)
    elif fresh is not None:  # hidden by the state bucket
        _step(store, Step.REMOVE, fresh, now, done, dry_run=dry_run, budget=budget, settled=settled)
    elif not carried_over(old.name):  # a claim: an old-configuration invocation's, no more
        _step(store, Step.REMOVE, old, now, done, dry_run=dry_run, budget=budget, settled=settled)
    elif not copyable(old.name):
        done.waiting.append((old.name, Wait.IN_USE))
    else:
        _step(store, Step.COPY, old, now, done, dry_run=dry_run, budget=budget, settled=settled)


def _step(
    store: SplitStore,
    step: Step,
    info: ObjectInfo,
    now: datetime,
    done: Pass,
    *,
    dry_run: bool,
    budget: int | None,
    settled: timedelta,
) -> None:
    """Take `step` once `info` (the object whose age decides) has not changed for `settled`."""
    name = info.name
    if now - info.updated < settled:
        done.waiting.append((name, Wait.RECENT if step is Step.COPY else Wait.HIDDEN_RECENTLY))
        return
    if _spent(done, budget):
        done.left += 1
        return
    if not dry_run:
        try:
            if step is Step.REMOVE:
                store.data.remove(name)
            elif step is Step.FORGET:
                store.state.delete(name, if_generation=info.generation)
            else:
                found = store.data.read(name)
                if found is None:
                    return
                store.state.create(name, found.data)
        except PreconditionFailed:
            return  # changed meanwhile in the state bucket: that one counts; the next pass sees it
    done.done.append((step, name))
