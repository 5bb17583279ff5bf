"""A listed view (`ListedStore`) answers below its prefix as its store would have answered when it
listed, on every store; it forwards the rest and refuses every write."""

from __future__ import annotations

import pytest

from turnstile.store.listed import ListedStore, ReadOnlyView
from turnstile.store.port import ObjectStore, PlacedStore

NAMES = (
    "ds/t/_bqlock",
    "ds/t/_backlog/2024/01/_SUCCESS",
    "ds/t/_backlog/2024/02/_SUCCESS",
    "ds/t/_backlog/2024/03/_SUCCESS",
    "ds/t/_turnstile/results/2024/01/7.json",
    "ds/t/_turnstile/results/2024/02/8.json",
    "ds/t/_turnstile/paused.json",
    "ds/t/2024/01/part-0.csv",
    "ds/u/_bqlock",
    "other/x/_bqlock",
)


@pytest.fixture
def filled(store: ObjectStore) -> ObjectStore:
    for name in NAMES:
        store.write(name, name.encode())
    return store


def test_listings_and_stats_below_the_prefix_are_the_stores(filled: ObjectStore) -> None:
    # A split store lists a folder with no reserved segment in the data bucket only (turnstile's
    # state is in the reserved folders of a table): its view of the whole prefix would miss state.
    whole = not isinstance(filled, PlacedStore)
    view = ListedStore.of(filled, "ds/" if whole else "ds/t/_")
    prefixes = ["ds/t/_", "ds/t/_backlog/", "ds/t/_turnstile/results/", "ds/t/_none/"]
    for prefix in prefixes + (["ds/", "ds/t/", "ds/none/"] if whole else []):
        assert view.list_objects(prefix) == filled.list_objects(prefix), prefix
        assert view.list_folders(prefix) == filled.list_folders(prefix), prefix
        entries = [(e.name, e.size) for e in view.list_entries(prefix)]
        assert entries == [(e.name, e.size) for e in filled.list_entries(prefix)], prefix
    head = "ds/t/_backlog/"
    assert view.list_objects(head, limit=2) == filled.list_objects(head, limit=2)
    ranged = {"start_offset": "ds/t/_backlog/2024/02", "end_offset": "ds/t/_backlog/2024/03"}
    assert view.list_objects(head, **ranged) == filled.list_objects(head, **ranged)
    assert [i.name for i in view.list_objects(head, **ranged)] == ["ds/t/_backlog/2024/02/_SUCCESS"]
    picky = {"limit": 2, "only": lambda name: "/02/" in name}
    assert view.list_objects(head, **picky) == filled.list_objects(head, **picky)  # type: ignore[arg-type]
    for name in ("ds/t/_bqlock", "ds/t/_turnstile/paused.json", "ds/t/_BACKFILL"):
        assert view.stat(name) == filled.stat(name), name
        assert view.read(name) == filled.read(name), name


def test_what_was_not_listed_is_absent_and_outside_the_prefix_is_asked(filled: ObjectStore) -> None:
    view = ListedStore.of(filled, "ds/t/_")
    filled.write("ds/t/_BACKFILL", b"")  # after the listing
    filled.write("other/x/_BACKFILL", b"")
    assert view.stat("ds/t/_BACKFILL") is None
    assert view.read("ds/t/_BACKFILL") is None
    assert view.list_objects("ds/t/_B") == []
    assert view.stat("other/x/_BACKFILL") is not None  # not covered: the store's answer, now
    assert [i.name for i in view.list_objects("other/x/_")] == ["other/x/_BACKFILL", "other/x/_bqlock"]
    assert view.list_folders("ds/") == filled.list_folders("ds/")


def test_a_view_refuses_every_write(filled: ObjectStore) -> None:
    view = ListedStore.of(filled, "ds/")
    lock = filled.stat("ds/t/_bqlock")
    assert lock is not None
    for write in (
        lambda: view.write("ds/t/_bqlock", b"x"),
        lambda: view.create("ds/t/_new", b"x"),
        lambda: view.replace("ds/t/_bqlock", b"x", if_generation=lock.generation),
        lambda: view.delete("ds/t/_bqlock", if_generation=lock.generation),
        lambda: view.remove("ds/t/_bqlock"),
    ):
        with pytest.raises(ReadOnlyView, match="read-only"):
            write()
    assert filled.read("ds/t/_bqlock") == filled.read("ds/t/_bqlock")
    found = filled.read("ds/t/_bqlock")
    assert found is not None and found.data == b"ds/t/_bqlock"
