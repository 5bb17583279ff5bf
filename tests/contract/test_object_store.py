"""One contract for every ObjectStore: the in-memory store, GCS (fake-gcs-server) and S3 (moto server)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from turnstile.core.errors import PreconditionFailed, StoreRefused
from turnstile.store.gcs import GcsStore
from turnstile.store.port import ObjectStore
from turnstile.store.s3 import S3Store


def race(n: int, attempt: Callable[[int], object]) -> tuple[list[object], list[BaseException]]:
    """Run `attempt(i)` in n threads released together; collect results and errors."""
    start = threading.Barrier(n)
    wins: list[object] = []
    losses: list[BaseException] = []
    guard = threading.Lock()

    def run(i: int) -> None:
        start.wait()
        try:
            result = attempt(i)
        except PreconditionFailed as exc:
            with guard:
                losses.append(exc)
        else:
            with guard:
                wins.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wins, losses


def test_absent_object_reads_as_none(store: ObjectStore) -> None:
    assert store.read("nope") is None
    assert store.stat("nope") is None


def test_create_returns_the_generation_read_back(store: ObjectStore) -> None:
    generation = store.create("t/a", b"hello")
    got = store.read("t/a")
    assert got is not None
    assert (got.data, got.generation) == (b"hello", generation)
    info = store.stat("t/a")
    assert info is not None
    assert (info.name, info.generation, info.size) == ("t/a", generation, 5)


def test_create_if_absent_refuses_an_existing_object_and_says_what_it_found(store: ObjectStore) -> None:
    first = store.create("t/a", b"mine")
    with pytest.raises(PreconditionFailed) as caught:
        store.create("t/a", b"theirs")
    assert caught.value.expected == 0
    assert caught.value.found is not None
    assert (caught.value.found.data, caught.value.found.generation) == (b"mine", first)
    assert store.read("t/a").data == b"mine"  # type: ignore[union-attr]


def test_compare_and_swap_succeeds_on_the_generation_read(store: ObjectStore) -> None:
    first = store.create("t/lock", b"1")
    second = store.replace("t/lock", b"2", if_generation=first)
    assert second > first
    assert store.read("t/lock").data == b"2"  # type: ignore[union-attr]


def test_compare_and_swap_on_a_stale_generation_fails_with_the_current_object(store: ObjectStore) -> None:
    first = store.create("t/lock", b"1")
    second = store.replace("t/lock", b"2", if_generation=first)
    with pytest.raises(PreconditionFailed) as caught:
        store.replace("t/lock", b"3", if_generation=first)
    assert caught.value.found is not None
    assert (caught.value.found.generation, caught.value.found.data) == (second, b"2")


def test_compare_and_swap_on_an_absent_object_fails(store: ObjectStore) -> None:
    with pytest.raises(PreconditionFailed) as caught:
        store.replace("t/none", b"x", if_generation=123)
    assert caught.value.found is None
    assert store.read("t/none") is None


def test_conditional_delete_on_the_right_generation(store: ObjectStore) -> None:
    generation = store.create("t/a", b"x")
    store.delete("t/a", if_generation=generation)
    assert store.read("t/a") is None


def test_conditional_delete_of_an_absent_object_fails(store: ObjectStore) -> None:
    with pytest.raises(PreconditionFailed):
        store.delete("t/none", if_generation=5)


def test_conditional_delete_on_a_stale_generation_fails(store: ObjectStore) -> None:
    """On fake-gcs-server, which ignores the precondition, through the write lock the product
    uses on an emulator (real GCS enforces it itself: see test_gcs_requests.py)."""
    first = store.create("t/a", b"x")
    store.replace("t/a", b"y", if_generation=first)
    with pytest.raises(PreconditionFailed):
        store.delete("t/a", if_generation=first)
    assert store.read("t/a").data == b"y"  # type: ignore[union-attr]


def test_plain_write_and_remove(store: ObjectStore) -> None:
    g1 = store.write("t/a", b"1")
    g2 = store.write("t/a", b"2")
    assert g2 > g1
    assert store.read("t/a").data == b"2"  # type: ignore[union-attr]
    assert store.remove("t/a") is True
    assert store.remove("t/a") is False
    assert store.read("t/a") is None


def test_listing_is_lexicographic_and_stays_inside_the_prefix(store: ObjectStore) -> None:
    for name in ["t/b/2", "t/a", "t/b/10", "tz", "t/b/1", "u/a", "t/B"]:
        store.write(name, b"")
    assert [o.name for o in store.list_objects("t/")] == ["t/B", "t/a", "t/b/1", "t/b/10", "t/b/2"]
    assert [o.name for o in store.list_objects("t/b/")] == ["t/b/1", "t/b/10", "t/b/2"]


def test_listing_from_an_offset_with_a_limit(store: ObjectStore) -> None:
    for i in range(10):
        store.write(f"t/{i:02d}", b"")
    store.write("u/00", b"")
    assert [o.name for o in store.list_objects("t/", limit=2)] == ["t/00", "t/01"]
    assert [o.name for o in store.list_objects("t/", start_offset="t/05", limit=3)] == [
        "t/05",
        "t/06",
        "t/07",
    ]
    assert [o.name for o in store.list_objects("t/", start_offset="t/08")] == ["t/08", "t/09"]
    assert store.list_objects("t/", start_offset="t/99") == []


def test_listing_sub_folders(store: ObjectStore) -> None:
    for name in ["ds/a/x", "ds/a/y/z", "ds/b/_SUCCESS", "ds/file", "other/c/x"]:
        store.write(name, b"")
    assert store.list_folders("ds/") == ["ds/a/", "ds/b/"]
    assert store.list_folders("") == ["ds/", "other/"]


def test_generations_grow_per_name(store: ObjectStore) -> None:
    seen = [store.write("t/g", str(i).encode()) for i in range(5)]
    assert seen == sorted(seen)
    assert len(set(seen)) == 5


def test_twenty_threads_racing_to_create_have_exactly_one_winner(store: ObjectStore) -> None:
    wins, losses = race(20, lambda i: store.create("t/claim", f"thread-{i}".encode()))
    assert len(wins) == 1
    assert len(losses) == 19
    final = store.read("t/claim")
    assert final is not None
    assert final.generation == wins[0]
    for loss in losses:
        assert isinstance(loss, PreconditionFailed)
        assert loss.found is not None and loss.found.generation == final.generation


def test_twenty_threads_racing_to_swap_one_generation_have_exactly_one_winner(store: ObjectStore) -> None:
    base = store.create("t/lock", b"free")
    wins, losses = race(20, lambda i: store.replace("t/lock", f"held-by-{i}".encode(), if_generation=base))
    assert len(wins) == 1
    assert len(losses) == 19
    final = store.read("t/lock")
    assert final is not None and final.generation == wins[0]


def test_compare_and_swap_loses_no_update_under_contention(store: ObjectStore) -> None:
    store.create("t/counter", b"0")

    def increment(_: int) -> None:
        done = 0
        while done < 5:
            current = store.read("t/counter")
            assert current is not None
            try:
                store.replace(
                    "t/counter", str(int(current.data) + 1).encode(), if_generation=current.generation
                )
            except PreconditionFailed:
                continue
            done += 1

    wins, losses = race(8, increment)
    assert (len(wins), losses) == (8, [])
    assert store.read("t/counter").data == b"40"  # type: ignore[union-attr]


def test_the_head_of_a_deep_listing_comes_back_without_listing_it_all(store: ObjectStore) -> None:
    # 10,000 pointers in memory; the emulators get fewer so the suite stays fast.
    depth = 300 if isinstance(store, GcsStore | S3Store) else 10_000
    for i in reversed(range(depth)):
        store.write(f"ds/t/_backlog/{i:05d}/_SUCCESS", b"")
    store.write("ds/t/_bqlock", b"")
    head = store.list_objects("ds/t/_backlog/", limit=3)
    assert [o.name for o in head] == [f"ds/t/_backlog/{i:05d}/_SUCCESS" for i in range(3)]
    after = store.list_objects("ds/t/_backlog/", start_offset=f"ds/t/_backlog/{depth - 2:05d}/", limit=5)
    assert [o.name for o in after] == [f"ds/t/_backlog/{i:05d}/_SUCCESS" for i in (depth - 2, depth - 1)]


def test_listing_a_range_between_offsets(store: ObjectStore) -> None:
    for name in ["t/a/1", "t/a/2", "t/b/1", "t/c/1", "t/_x/1", "u/b"]:
        store.write(name, b"")
    assert [o.name for o in store.list_objects("t/", start_offset="t/a0", end_offset="t/c/")] == ["t/b/1"]
    assert [o.name for o in store.list_objects("t/", end_offset="t/a/2")] == ["t/_x/1", "t/a/1"]


def test_a_listing_keeps_only_the_names_asked_for(store: ObjectStore) -> None:
    written = {name: store.write(name, b"") for name in ["t/a/1", "t/a/_SUCCESS", "t/b/1", "t/b/_SUCCESS"]}
    found = store.list_objects("t/", start_offset="t/b", only=lambda name: name.endswith("/_SUCCESS"))
    assert [(o.name, o.generation) for o in found] == [("t/b/_SUCCESS", written["t/b/_SUCCESS"])]


def test_a_listing_of_entries_names_sizes_and_times_what_a_full_listing_does(store: ObjectStore) -> None:
    for name, data in [("t/a/1", b"one"), ("t/a/2", b""), ("t/b/1", b"three"), ("t/c/1", b"4"), ("u/b", b"")]:
        store.write(name, data)
    for options in ({}, {"start_offset": "t/a/2", "end_offset": "t/c/"}, {"limit": 2}):
        full = store.list_objects("t/", **options)  # type: ignore[arg-type]
        entries = store.list_entries("t/", **options)  # type: ignore[arg-type]
        assert [(e.name, e.size, e.updated) for e in entries] == [(o.name, o.size, o.updated) for o in full]
        # A generation where the store's listing carries it (not on S3), and then the same one.
        assert all(e.generation in (None, o.generation) for e, o in zip(entries, full, strict=True))
    assert [e.name for e in store.list_entries("t/", limit=2)] == ["t/a/1", "t/a/2"]


def test_listing_a_bucket_that_does_not_exist_is_refused_naming_it(gcs_store: GcsStore) -> None:
    """fake-gcs-server answers a listing of a missing bucket with 404, as GCS does: refused (retrying
    cannot help), naming the bucket, for both kinds of listing."""
    missing = GcsStore(gcs_store._client, "no-such-bucket-contract")
    for listing in (lambda: missing.list_objects("ds/"), lambda: missing.list_folders("")):
        with pytest.raises(StoreRefused, match="the bucket gs://no-such-bucket-contract does not exist"):
            listing()
