"""With a state bucket (STATE_BUCKET) turnstile's own objects cost no function invocation: the
data bucket's events are upstream's files, `_SUCCESS`, the gate, `_BACKFILL` and each job's `.done`
signal. Order, exactly-once, the failure cycle and the operator's commands are unchanged."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest
from google.cloud import storage

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.jobs.inline import InlineRunner
from turnstile.local import emulator as emu
from turnstile.names.paths import ObjectKind, classify
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops import skip as skip_ops
from turnstile.ops import status as status_ops
from turnstile.protocol import operator, sweeper
from turnstile.protocol import reprocess as requests
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
    """The lock and the history carry over: the first run after the switch goes on from the
    position the data bucket's lock holds, and applies only the new batch."""
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
    assert isinstance(after.runner, InlineRunner) and len(after.runner.submitted) == 1  # 03's job only


# Switching an existing deployment: what the data bucket's state objects say still holds afterwards.


Switch = Callable[[Host, dict[str, str]], Host]


@pytest.fixture
def switch(
    monkeypatch: pytest.MonkeyPatch,
    gcs_emulator: emu.Emulator,
    gcs_client: storage.Client,
    gcs_store: GcsStore,
) -> Switch:
    """Set STATE_BUCKET on a deployment that ran without one: a new function host over the same
    bucket and tables, wired to both buckets."""

    def to_state_bucket(before: Host, env: dict[str, str]) -> Host:
        name = f"{gcs_store.bucket}-state"
        gcs_emulator.create_bucket(name)
        state = GcsStore(gcs_client, name, emulator_writes=WriteLock.for_emulator(gcs_emulator.url))
        env = env | {"STATE_BUCKET": name}
        return start_host(monkeypatch, gcs_store, env, state=state, tables=before.tables)

    return to_state_bucket


def upload_unannounced(host: Host, rel: str) -> int:
    """Upstream writes a batch whose event is lost: only the sweeper or a later run finds it."""
    generation = host.put_batch(f"{TABLE}/{rel}")
    host.events.clear()
    return generation


def test_a_batch_skipped_before_the_switch_is_not_applied_after_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, switch: Switch
) -> None:
    before = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(before, ["01"])
    before.drain()
    generations["02"] = upload_unannounced(before, "02")
    dropped = skip_ops.skip(invocation(before), f"{TABLE}/02/_SUCCESS", reason="bad upstream export")
    assert dropped.generation == generations["02"]
    after = switch(before, ORDERED)
    generations |= put_all(after, ["03"])
    after.drain()
    sweeper.sweep(invocation(after))  # the reconciliation lists the table's batches again
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01", "03"])
    assert after.backlog(TABLE) == [] and after.lock(TABLE).position == "03"


def test_a_batch_dropped_with_unlock_skip_head_before_the_switch_is_not_applied_after_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, switch: Switch
) -> None:
    before = start_host(monkeypatch, gcs_store, ORDERED)
    before.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 1}).encode())
    before.tables.failing.add("02")
    generations = put_all(before, ["01", "02", "03"])
    before.drain()
    assert before.lock(TABLE).state is LockState.FAILED
    operator.unlock(invocation(before), table(before), skip_head=True)
    before.drain()
    before.tables.failing.clear()  # applying it again would now succeed: nothing may try
    assert before.tables.commits[TABLE] == commits_in(generations, ["01", "03"])
    after = switch(before, ORDERED)
    generations |= put_all(after, ["04"])
    after.drain()
    sweeper.sweep(invocation(after))
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01", "03", "04"])
    assert after.backlog(TABLE) == [] and after.lock(TABLE).position == "04"


def test_a_table_blocked_at_the_switch_stays_blocked_until_unlocked(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, switch: Switch
) -> None:
    before = start_host(monkeypatch, gcs_store, ORDERED)
    before.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 1}).encode())
    before.tables.failing.add("02")
    generations = put_all(before, ["01", "02", "03"])
    before.drain()
    assert before.lock(TABLE).state is LockState.FAILED
    before.tables.failing.clear()
    after = switch(before, ORDERED)
    generations |= put_all(after, ["04"])
    after.drain()
    sweeper.sweep(invocation(after))
    after.drain()
    lock = after.lock(TABLE)
    assert (lock.state, lock.failed_rel) == (LockState.FAILED, "02")  # nobody unlocked it
    assert after.tables.commits[TABLE] == commits_in(generations, ["01"])
    operator.unlock(invocation(after), table(after), skip_head=True)  # the operator drops it
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01", "03", "04"])
    assert after.backlog(TABLE) == [] and after.lock(TABLE).state is LockState.FREE


def test_a_failed_unordered_batch_stays_failed_across_the_switch_until_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, switch: Switch
) -> None:
    before = start_host(monkeypatch, gcs_store, {})
    before.tables.failing.add("02")
    generations = put_all(before, ["01", "02"])
    before.drain()
    assert before.applied(TABLE) == ["01"]
    before.tables.failing.clear()  # fixed, but the operator has not retried it yet
    after = switch(before, {})
    generations |= put_all(after, ["03"])
    after.drain()
    sweeper.sweep(invocation(after))  # reconciliation and the watchdog: neither resubmits it
    after.drain()
    assert sorted(after.tables.commits[TABLE]) == commits_in(generations, ["01", "03"])
    shown = status_ops.table_status(invocation(after), table(after))
    assert [f.rel for f in shown.failed_batches] == ["02"]
    retry_ops.retry(invocation(after), f"{TABLE}/02/_SUCCESS")
    after.drain()
    sweeper.sweep(invocation(after))
    after.drain()
    assert sorted(after.tables.commits[TABLE]) == commits_in(generations, ["01", "02", "03"])
    assert status_ops.table_status(invocation(after), table(after)).failed_batches == ()


def test_a_reprocess_request_pending_at_the_switch_is_applied_once_after_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, switch: Switch
) -> None:
    before = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(before, ["01"])
    before.drain()
    operator.pause(invocation(before), table(before))
    generations |= put_all(before, ["02"])
    before.drain()
    reprocess_ops.request(invocation(before), f"{TABLE}/01/_SUCCESS", reason="a fixed transform")
    before.drain()
    assert before.tables.commits[TABLE] == commits_in(generations, ["01"])  # paused: all waits
    after = switch(before, ORDERED)
    after.drain()
    sweeper.sweep(invocation(after))
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01"])  # still paused
    operator.resume(invocation(after), table(after))
    after.drain()
    sweeper.sweep(invocation(after))
    after.drain()
    assert after.tables.commits[TABLE] == commits_in(generations, ["01", "02", "01"])
    assert after.view.list_objects(requests.folder(table(after))) == []  # used up
    assert after.backlog(TABLE) == [] and after.lock(TABLE).state is LockState.FREE
