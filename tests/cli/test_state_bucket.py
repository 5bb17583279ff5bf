"""The commands on a deployment with a state bucket (STATE_BUCKET): the data bucket's
`_STATE_BUCKET` marker says where the backlog and the locks are, so an operator needs no setting."""

from __future__ import annotations

import json

import pytest
from google.cloud import storage

from tests.cli.conftest import Run, World, one_error_line
from turnstile.local import emulator as emu
from turnstile.names.paths import Table
from turnstile.names.placement import MOVED_MARKER, STATE_MARKER
from turnstile.state.records import Lock, LockState
from turnstile.store.gcs import GcsStore
from turnstile.store.split import SplitStore

HEAD = "incremental/2024/05/01/13"
NEXT = "incremental/2024/05/01/14"


@pytest.fixture
def state(gcs_emulator: emu.Emulator, gcs_client: storage.Client, bucket_name: str) -> GcsStore:
    name = f"{bucket_name}-state"
    gcs_emulator.create_bucket(name)
    return GcsStore(gcs_client, name)


@pytest.fixture
def apart(gcs_store: GcsStore, state: GcsStore, run: Run) -> World:
    """A FAILED table whose lock and pointers are in the state bucket, as the functions write them."""
    del run  # the local-stack file first
    gcs_store.write(STATE_MARKER, state.bucket.encode())
    world = World(SplitStore(gcs_store, state), Table(gcs_store.bucket, "sales/orders", "sales", "orders"))
    world.queue(HEAD)
    world.queue(NEXT)
    world.fail(HEAD, position="incremental/2024/05/01/12")
    assert gcs_store.stat(world.table.lock) is None and state.stat(world.table.lock) is not None
    return world


def test_status_finds_the_lock_and_backlog_in_the_state_bucket(run: Run, apart: World) -> None:
    result = run("status", apart.uri, "--output", "json")
    assert result.exit_code == 1, result.output  # a BLOCKED table
    [table] = json.loads(result.stdout)["tables"]
    assert table["health"] == "BLOCKED"
    assert table["backlog_depth"] == 2 and table["backlog_head"] == HEAD
    assert table["lock"]["failed_rel"] == HEAD


def test_unlock_skip_head_works_on_the_state_bucket(run: Run, apart: World, state: GcsStore) -> None:
    result = run("unlock", apart.uri, "--yes", "--skip-head")
    assert result.exit_code == 0, result.output
    found = state.read(apart.table.lock)
    assert found is not None and Lock.decode(found.data, found.name).state is LockState.FREE
    assert state.stat(apart.table.pointer(HEAD)) is None
    assert state.stat(apart.table.pointer(NEXT)) is not None
    assert apart.store.stat(apart.table.backfill) is not None  # `_BACKFILL` wakes the functions


def test_a_state_bucket_setting_that_disagrees_with_the_marker_is_refused(
    run: Run, apart: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATE_BUCKET", "somewhere-else")
    result = run("status", apart.uri)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "STATE_BUCKET is somewhere-else" in line
    assert f"_STATE_BUCKET says the backlog and locks of {apart.store.bucket} are in" in line


# migrate-state: what a switched deployment's data bucket still holds of turnstile's state.


@pytest.fixture
def switched(gcs_store: GcsStore, state: GcsStore, run: Run) -> World:
    """A deployment switched to a state bucket: its FAILED lock and pointers still in the data bucket."""
    del run
    world = World(gcs_store, Table(gcs_store.bucket, "sales/orders", "sales", "orders"))
    world.queue(HEAD)
    world.fail(HEAD, position="incremental/2024/05/01/12")
    gcs_store.write(STATE_MARKER, state.bucket.encode())  # Terraform, at the switch
    return world


def test_status_after_the_switch_still_shows_the_lock_left_in_the_data_bucket(
    run: Run, switched: World
) -> None:
    result = run("status", switched.uri, "--output", "json")
    assert result.exit_code == 1, result.output
    [table] = json.loads(result.stdout)["tables"]
    assert table["health"] == "BLOCKED" and table["lock"]["failed_rel"] == HEAD


def test_migrate_state_says_what_waits_and_changes_nothing_on_a_dry_run(
    run: Run, switched: World, state: GcsStore
) -> None:
    bucket = f"gs://{switched.store.bucket}"
    result = run("migrate-state", bucket, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would copy 0 old state objects" in result.stdout
    assert "wait: changed less than a day ago" in result.stdout  # the lock, just failed
    assert "wait: goes when it is applied, dropped or ended" in result.stdout  # the pointer
    assert "dry run: nothing was changed" in result.stdout
    assert state.list_objects("") == []
    found = json.loads(run("migrate-state", bucket, "--output", "json").stdout)
    assert found["moved"] is False and found["steps"] == []
    assert {w["object"] for w in found["waiting"]} == {switched.table.lock, switched.table.pointer(HEAD)}


def test_migrate_state_on_a_moved_or_a_one_bucket_deployment(
    run: Run, gcs_store: GcsStore, state: GcsStore, bucket_name: str
) -> None:
    result = run("migrate-state", f"gs://{bucket_name}")
    assert result.exit_code == 2 and "has no state bucket" in one_error_line(result)
    gcs_store.write(STATE_MARKER, state.bucket.encode())
    moved = run("migrate-state", f"gs://{bucket_name}")
    assert moved.exit_code == 0, moved.output
    assert "nothing of turnstile's state is left" in moved.stdout  # an empty data bucket: moved
    assert state.read(MOVED_MARKER) is not None
    again = run("migrate-state", f"gs://{bucket_name}")
    assert "holds none of turnstile's state" in again.stdout
    refused = run("migrate-state", f"gs://{bucket_name}/sales")
    assert refused.exit_code == 2 and "pass the bucket alone" in one_error_line(refused)
