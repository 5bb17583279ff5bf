"""The state bucket (STATE_BUCKET) over two real buckets of fake-gcs-server: each object lands in
the bucket `turnstile.names.placement` names, listings read the right ones, and people are told where
an object is."""

from __future__ import annotations

import pytest
from google.cloud import storage

from turnstile.config.settings import Settings
from turnstile.core.errors import PreconditionFailed
from turnstile.entrypoints import wiring
from turnstile.local import emulator as emu
from turnstile.names.paths import Table
from turnstile.names.placement import MOVED_MARKER
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore
from turnstile.store.port import object_uri
from turnstile.store.split import SplitStore

T = Table("b", "ds/tbl", "ds", "tbl")


@pytest.fixture
def state(gcs_emulator: emu.Emulator, gcs_client: storage.Client, bucket_name: str) -> GcsStore:
    name = f"{bucket_name}-state"
    gcs_emulator.create_bucket(name)
    return GcsStore(gcs_client, name, emulator_writes=WriteLock.for_emulator(gcs_emulator.url))


@pytest.fixture
def split(gcs_store: GcsStore, state: GcsStore) -> SplitStore:
    return SplitStore(gcs_store, state)


def names(store: GcsStore) -> list[str]:
    return [info.name for info in store.list_objects("")]


def test_each_object_lands_in_its_bucket(split: SplitStore, gcs_store: GcsStore, state: GcsStore) -> None:
    split.write("ds/tbl/2024/05/01/10/part-0.csv", b"id\n1\n")
    split.write("ds/tbl/2024/05/01/10/_SUCCESS", b"")
    split.create(T.pointer("2024/05/01/10"), b"{}")
    split.create(T.lock, b"{}")
    split.write(T.manifest("job-1"), b"{}")
    split.write(T.result("2024/05/01/10", 5), b"{}")
    split.write(T.done_signal("job-1"), b"{}")
    assert names(gcs_store) == [
        "ds/tbl/2024/05/01/10/_SUCCESS",
        "ds/tbl/2024/05/01/10/part-0.csv",
        T.done_signal("job-1"),
    ]
    assert names(state) == [
        T.pointer("2024/05/01/10"),
        T.lock,
        T.manifest("job-1"),
        T.result("2024/05/01/10", 5),
    ]
    assert object_uri(split, T.lock) == f"gs://{state.bucket}/{T.lock}"
    assert (
        object_uri(split, "ds/tbl/2024/05/01/10/_SUCCESS")
        == f"gs://{gcs_store.bucket}/ds/tbl/2024/05/01/10/_SUCCESS"
    )
    assert split.bucket == gcs_store.bucket  # the protocol knows the table by its data bucket


def test_preconditions_hold_in_the_state_bucket(split: SplitStore, state: GcsStore) -> None:
    generation = split.create(T.lock, b"free")
    with pytest.raises(PreconditionFailed):
        split.create(T.lock, b"again")
    with pytest.raises(PreconditionFailed):
        split.replace(T.lock, b"stale", if_generation=generation + 1)
    newer = split.replace(T.lock, b"running", if_generation=generation)
    found = state.read(T.lock)
    assert found is not None and (found.data, found.generation) == (b"running", newer)
    split.delete(T.lock, if_generation=newer)
    assert split.read(T.lock) is None


def test_the_jobs_folder_lists_manifests_and_done_signals_together(split: SplitStore) -> None:
    split.write(T.manifest("job-1"), b"{}")
    split.write(T.done_signal("job-1"), b"{}")
    split.write(T.manifest("job-2"), b"{}")
    listed = [info.name for info in split.list_objects(f"{T.internal}jobs/")]
    assert listed == [T.done_signal("job-1"), T.manifest("job-1"), T.manifest("job-2")]
    assert [i.name for i in split.list_objects(f"{T.internal}jobs/", limit=2)] == listed[:2]
    assert split.list_folders(f"{T.prefix}/") == [f"{T.prefix}/_turnstile/"]


def test_listings_read_one_bucket_where_the_prefix_says_which(
    split: SplitStore, gcs_store: GcsStore, state: GcsStore
) -> None:
    state.write(MOVED_MARKER, gcs_store.bucket.encode())  # the data bucket's old state all moved
    split.write("ds/tbl/2024/05/01/10/_SUCCESS", b"")
    split.create(T.pointer("2024/05/01/10"), b"{}")
    # A pointer copied into the data bucket by hand is not in the backlog the functions read.
    gcs_store.write(T.pointer("2024/05/01/11"), b"{}")
    assert [i.name for i in split.list_objects(T.backlog)] == [T.pointer("2024/05/01/10")]
    assert [i.name for i in split.list_objects("ds/tbl/2024/")] == ["ds/tbl/2024/05/01/10/_SUCCESS"]
    assert split.read(T.pointer("2024/05/01/11")) is None


def test_wiring_builds_the_split_store_from_the_settings(emulator_env: emu.Emulator, state: GcsStore) -> None:
    settings = Settings.from_env({"STORAGE_EMULATOR_HOST": emulator_env.url, "STATE_BUCKET": state.bucket})
    built = wiring.object_store(settings, "data-bucket")
    assert isinstance(built, SplitStore)
    assert (built.bucket, built.bucket_of(T.lock)) == ("data-bucket", state.bucket)
    assert not isinstance(wiring.object_store(settings, state.bucket), SplitStore)  # its own bucket
    plain = Settings.from_env({"STORAGE_EMULATOR_HOST": emulator_env.url})
    assert not isinstance(wiring.object_store(plain, "data-bucket"), SplitStore)


def test_the_state_bucket_must_be_another_bucket(gcs_store: GcsStore) -> None:
    with pytest.raises(ValueError, match="must not be the data bucket"):
        SplitStore(gcs_store, gcs_store)
