"""A deployment switched to a state bucket: the state objects its data bucket held before the switch
still count, read through the split store, until the state bucket says they have all moved. Every
change lands in the state bucket with one precondition that decides it, as with one bucket. Run
over two real buckets of fake-gcs-server and over two in-memory buckets sharing one generation
counter (the simulation's)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import storage

from tests.conftest import AWS_REGION
from turnstile.core.errors import PreconditionFailed
from turnstile.local import emulator as emu
from turnstile.names.paths import Table, claim_name
from turnstile.names.placement import MOVED_MARKER, TOMBSTONE
from turnstile.store import carryover
from turnstile.store.carryover import Step, Wait
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore, object_uri
from turnstile.store.s3 import S3Store
from turnstile.store.s3 import make_client as make_s3_client
from turnstile.store.split import MovedBuckets, SplitStore

T = Table("b", "ds/tbl", "ds", "tbl")
POINTERS = [T.pointer(f"2024/05/01/{h:02d}") for h in range(10, 16)]


@pytest.fixture(params=["gcs", "memory", "s3"])
def buckets(
    request: pytest.FixtureRequest, gcs_emulator: emu.Emulator, gcs_client: storage.Client, bucket_name: str
) -> Iterator[tuple[ObjectStore, ObjectStore]]:
    """(data, state): two empty buckets."""
    if request.param == "memory":
        generations = itertools.count(1_700_000_000_000_001)
        yield MemoryStore("data", generations=generations), MemoryStore("state", generations=generations)
        return
    if request.param == "s3":
        data: S3Store = request.getfixturevalue("s3_store")
        client = make_s3_client(AWS_REGION, request.getfixturevalue("moto_server"))
        name = f"{data.bucket}-state"
        client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": AWS_REGION})
        yield data, S3Store(client, name)
        return
    writes = WriteLock.for_emulator(gcs_emulator.url)
    gcs_emulator.create_bucket(f"{bucket_name}-state")
    yield (
        GcsStore(gcs_client, bucket_name, emulator_writes=writes),
        GcsStore(gcs_client, f"{bucket_name}-state", emulator_writes=writes),
    )


def names(listed: list[object]) -> list[str]:
    return [info.name for info in listed]  # type: ignore[attr-defined]


def test_old_copies_are_read_until_the_state_bucket_has_the_name(
    buckets: tuple[ObjectStore, ObjectStore],
) -> None:
    data, state = buckets
    lock = data.write(T.lock, b"failed lock")
    data.write(T.result("01", 5), b"dropped")
    data.write(POINTERS[0], b"pointer")
    data.write(claim_name(T.backfill, 3), b"claim")  # a claim only spares work: never carried over
    split = SplitStore(data, state)
    found = split.read(T.lock)
    assert found is not None and (found.data, found.generation) == (b"failed lock", lock)
    assert split.stat(T.result("01", 5)) is not None
    assert names(split.list_objects(T.backlog)) == [POINTERS[0]]
    assert names(split.list_objects(T.internal)) == [T.result("01", 5)]
    assert split.read(claim_name(T.backfill, 3)) is None
    assert object_uri(split, T.lock) == f"{data.scheme}://{data.bucket}/{T.lock}"  # where a person finds it
    # A change lands in the state bucket and hides the old copy from then on.
    newer = split.replace(T.lock, b"free lock", if_generation=lock)
    assert state.read(T.lock) is not None and data.read(T.lock) is not None
    found = split.read(T.lock)
    assert found is not None and (found.data, found.generation) == (b"free lock", newer)
    assert object_uri(split, T.lock) == f"{state.scheme}://{state.bucket}/{T.lock}"
    with pytest.raises(PreconditionFailed):
        split.replace(T.lock, b"stale", if_generation=lock)  # read before the change: refused


def test_of_two_writers_that_read_the_old_copy_one_wins(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    lock = data.write(T.lock, b"free")
    wins: list[bytes] = []
    start = threading.Barrier(8)

    def take(i: int) -> None:
        split = SplitStore(data, state)  # each its own function instance
        start.wait()
        try:
            split.replace(T.lock, b"running %d" % i, if_generation=lock)
            wins.append(b"running %d" % i)
        except PreconditionFailed:
            pass

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    found = SplitStore(data, state).read(T.lock)
    assert found is not None and found.data == wins[0]


def test_a_name_deleted_since_the_switch_stays_deleted(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    old = data.write(POINTERS[0], b"applied since")
    kept = data.write(POINTERS[1], b"still queued")
    split = SplitStore(data, state)
    with pytest.raises(PreconditionFailed):
        split.delete(POINTERS[0], if_generation=old + 1)
    split.delete(POINTERS[0], if_generation=old)
    assert state.read(POINTERS[0]) is not None  # a tombstone: the old copy must not count again
    assert split.read(POINTERS[0]) is None and split.stat(POINTERS[0]) is None
    assert names(split.list_objects(T.backlog)) == [POINTERS[1]]
    with pytest.raises(PreconditionFailed):
        split.delete(POINTERS[0], if_generation=old)  # twice: the second finds it gone
    with pytest.raises(PreconditionFailed) as refused:
        split.create(POINTERS[1], b"queued again")  # the old copy exists: not created
    assert refused.value.found is not None and refused.value.found.generation == kept
    again = split.create(POINTERS[0], b"uploaded again")  # created over its tombstone
    found = split.read(POINTERS[0])
    assert found is not None and (found.data, found.generation) == (b"uploaded again", again)
    # A state-bucket object over an old copy, deleted: a tombstone again, not the old copy back.
    split.delete(POINTERS[0], if_generation=again)
    assert split.read(POINTERS[0]) is None
    assert split.remove(POINTERS[1]) and not split.remove(POINTERS[1])
    assert split.list_objects(T.backlog) == []


def test_a_listing_with_a_limit_skips_what_is_deleted(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    generations = [data.write(name, b"old") for name in POINTERS[:4]]
    split = SplitStore(data, state)
    for name, generation in zip(POINTERS[:3], generations, strict=False):
        split.delete(name, if_generation=generation)  # applied since the switch
    split.create(POINTERS[4], b"new")
    assert names(split.list_objects(T.backlog, limit=1)) == [POINTERS[3]]
    assert names(split.list_objects(T.backlog, limit=2)) == POINTERS[3:5]
    assert names(split.list_objects(T.backlog, start_offset=POINTERS[4])) == [POINTERS[4]]


def test_a_tombstone_sized_record_is_still_a_record(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    lookalike = b"x" * len(TOMBSTONE)
    split = SplitStore(data, state)
    split.write(T.result("01", 5), lookalike)
    assert split.stat(T.result("01", 5)) is not None
    assert names(split.list_objects(T.internal)) == [T.result("01", 5)]


def test_once_moved_the_data_bucket_is_not_read_for_state(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    data.write(T.lock, b"left behind")
    state.write(MOVED_MARKER, data.bucket.encode())
    memo = MovedBuckets()
    split = SplitStore(data, state, moved=memo)
    assert split.read(T.lock) is None and split.list_objects(T.internal) == []
    assert split.create(T.lock, b"free")
    assert memo.knows(data.bucket, state.bucket)
    state.write(MOVED_MARKER, b"another-bucket")  # a marker for another data bucket is no marker
    assert SplitStore(data, state).carries_over()
    assert not SplitStore(data, state, moved=memo).carries_over()  # the process remembers


# Moving the old copies out of the data bucket (`store.carryover`): the sweeper's pass, migrate-state.


def later(days: float) -> datetime:
    return datetime.now(UTC) + timedelta(days=days)


def test_old_copies_move_a_day_after_they_last_changed_and_then_the_data_bucket_is_not_read(
    buckets: tuple[ObjectStore, ObjectStore],
) -> None:
    data, state = buckets
    data.write(T.result("01", 5), b"committed")
    data.write(T.manifest("job-1"), b"manifest")
    data.write(T.done_signal("job-1"), b"done")  # a job's end: the data bucket's, not moved
    data.write(T.lock, b"free lock")
    dropped = data.write(T.pointer("02"), b"dropped since")
    data.write(f"{T.prefix}/_claimed__BACKFILL_created_at_7", b"old claim")
    split = SplitStore(data, state)
    split.delete(T.pointer("02"), if_generation=dropped)  # a tombstone over the old copy
    assert carryover.move(split, [T.prefix], later(0)).done == []  # nothing is a day old yet
    first = carryover.move(split, [T.prefix], later(2))
    assert sorted(first.done) == sorted(
        [
            (Step.COPY, T.result("01", 5)),
            (Step.COPY, T.manifest("job-1")),
            (Step.COPY, T.lock),
            (Step.REMOVE, T.pointer("02")),  # hidden by its tombstone
            (Step.REMOVE, f"{T.prefix}/_claimed__BACKFILL_created_at_7"),
        ]
    )
    assert not first.moved and state.read(MOVED_MARKER) is None
    for name, content in ((T.result("01", 5), b"committed"), (T.lock, b"free lock")):
        found = split.read(name)
        assert found is not None and found.data == content
    second = carryover.move(split, [T.prefix], later(4))  # the copies a day old: the old ones go
    assert sorted(step for step, _ in second.done) == [Step.FORGET, Step.REMOVE, Step.REMOVE, Step.REMOVE]
    assert data.list_objects(f"{T.prefix}/") == [data.stat(T.done_signal("job-1"))]
    third = carryover.move(split, [T.prefix], later(6))
    assert third.moved and third.done == [] and state.read(MOVED_MARKER) is not None
    assert not SplitStore(data, state).carries_over()
    found = SplitStore(data, state).read(T.result("01", 5))
    assert found is not None and found.data == b"committed"


def test_what_a_lock_or_a_running_job_holds_by_generation_is_never_copied(
    buckets: tuple[ObjectStore, ObjectStore],
) -> None:
    data, state = buckets
    pointer = data.write(T.pointer("01"), b"queued")
    data.write(f"{T.internal}reprocess/20240501T000000000000Z-abc.json", b"request")
    data.write(T.open_job("job-9"), b"running")
    split = SplitStore(data, state)
    done = carryover.move(split, [T.prefix], later(30))
    assert done.done == [] and not done.moved
    assert {why for _, why in done.waiting} == {Wait.IN_USE}
    split.delete(T.pointer("01"), if_generation=pointer)  # applied: the protocol deletes it
    assert (Step.REMOVE, T.pointer("01")) not in carryover.move(split, [T.prefix], later(0)).done
    assert (Step.REMOVE, T.pointer("01")) in carryover.move(split, [T.prefix], later(30)).done


def test_a_dry_run_changes_nothing_and_a_budget_leaves_the_rest(
    buckets: tuple[ObjectStore, ObjectStore],
) -> None:
    data, state = buckets
    for h in range(5):
        data.write(T.result(f"{h:02d}", 5), b"committed")
    split = SplitStore(data, state)
    dry = carryover.move(split, [T.prefix], later(2), dry_run=True)
    assert len(dry.done) == 5 and state.list_objects("") == []
    some = carryover.move(split, [T.prefix], later(2), budget=2)
    assert (len(some.done), some.left) == (2, 3) and len(state.list_objects("")) == 2


def test_an_empty_data_bucket_moves_at_once(buckets: tuple[ObjectStore, ObjectStore]) -> None:
    data, state = buckets
    data.write("ds/tbl/2024/05/01/10/_SUCCESS", b"")  # upstream's: not state
    split = SplitStore(data, state)
    assert carryover.move(split, [T.prefix], datetime.now(UTC)).moved
    assert not SplitStore(data, state).carries_over()
