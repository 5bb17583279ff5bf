"""With a state bucket (STATE_BUCKET) turnstile's own objects cost no function invocation: the
data bucket's events are upstream's files, `_SUCCESS`, the gate, `_BACKFILL` and each job's `.done`
signal. Order, exactly-once, the failure cycle and the operator's commands are unchanged."""

from __future__ import annotations

import json
import random

import pytest
from google.cloud import storage

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.local import emulator as emu
from turnstile.names.paths import ObjectKind, classify
from turnstile.protocol import operator
from turnstile.state.records import LockState
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore


@pytest.fixture
def state_host(
    monkeypatch: pytest.MonkeyPatch,
    gcs_emulator: emu.Emulator,
    gcs_client: storage.Client,
    gcs_store: GcsStore,
) -> Host:
    name = f"{gcs_store.bucket}-state"
    gcs_emulator.create_bucket(name)
    state = GcsStore(gcs_client, name, emulator_writes=WriteLock.for_emulator(gcs_emulator.url))
    return start_host(monkeypatch, gcs_store, ORDERED | {"STATE_BUCKET": name}, state=state)


def event_kinds(host: Host) -> list[ObjectKind]:
    return [classify(name) for name, _, _ in host.delivered]


def test_ordered_batches_apply_in_order_with_two_events_per_batch_at_most(state_host: Host) -> None:
    host = state_host
    hours = [f"incremental/2024/05/01/{h:02d}" for h in range(8)]
    generations = put_all(host, hours)
    host.drain(rng=random.Random(3), duplicates=0.2)
    assert host.tables.commits[TABLE] == commits_in(generations, hours)
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE and host.lock(TABLE).position == hours[-1]
    # The data bucket holds the batches and the jobs' `.done` signals, nothing else of turnstile's.
    data = [info.name for info in host.store.inner.list_objects(f"{TABLE}/")]
    assert not [
        n for n in data if classify(n) not in (ObjectKind.DATA, ObjectKind.SUCCESS, ObjectKind.JOB_DONE)
    ]
    assert host.state is not None
    kept = {classify(info.name) for info in host.state.list_objects("")}
    # The lock, manifests, result records and the claims of handled events; no pointer is left.
    assert ObjectKind.LOCK in kept and ObjectKind.INTERNAL in kept
    assert kept <= {ObjectKind.LOCK, ObjectKind.INTERNAL, ObjectKind.CLAIM}
    # Each delivery of the same event counted once: upstream's `_SUCCESS` and a job's end.
    firsts = {(name, generation) for name, generation, _ in host.delivered}
    own = [name for name, _ in firsts if classify(name) not in (ObjectKind.DATA, ObjectKind.SUCCESS)]
    assert {classify(name) for name in own} <= {ObjectKind.JOB_DONE, ObjectKind.BACKFILL}
    assert (len(own) + len(hours)) / len(hours) <= 2


def test_a_failed_batch_blocks_the_table_and_unlock_applies_the_rest(state_host: Host) -> None:
    host = state_host
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 1}).encode())
    host.tables.failing.add("02")
    generations = put_all(host, ["01", "02", "03"])
    host.drain()
    lock = host.lock(TABLE)
    assert (lock.state, lock.failed_rel, host.backlog(TABLE)) == (LockState.FAILED, "02", ["02", "03"])
    assert lock.unlock_command == f"turnstile unlock gs://{host.bucket}/{TABLE} [--skip-head]"
    assert host.store.inner.stat(f"{TABLE}/_bqlock") is None  # in the state bucket only
    blocked = [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert len(blocked) == 1 and blocked[0]["severity"] == "ERROR"
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert host.backlog(TABLE) == [] and host.lock(TABLE).state is LockState.FREE


def test_switching_an_existing_table_to_a_state_bucket_applies_nothing_twice(
    monkeypatch: pytest.MonkeyPatch,
    gcs_emulator: emu.Emulator,
    gcs_client: storage.Client,
    gcs_store: GcsStore,
) -> None:
    """The position and history stay in the data bucket: the first run after the switch finds no
    lock, takes the table's batches from the start again, and the job skips those committed."""
    before = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(before, ["01", "02"])
    before.drain()
    assert before.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    name = f"{gcs_store.bucket}-state"
    gcs_emulator.create_bucket(name)
    state = GcsStore(gcs_client, name, emulator_writes=WriteLock.for_emulator(gcs_emulator.url))
    after = start_host(
        monkeypatch, gcs_store, ORDERED | {"STATE_BUCKET": name}, state=state, tables=before.tables
    )
    generations |= put_all(after, ["03"])
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert after.backlog(TABLE) == [] and after.lock(TABLE).position == "03"
