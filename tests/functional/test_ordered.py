"""Ordered tables end to end: the original loader's ordering scenarios (docs/PROTOCOL.md), the
gate, WAIT_FOR_VALIDATION, coalescing.

Every test drives functions/main.py through real CloudEvents (see harness.py) and checks what the
table received (`host.tables.commits`: rel and `_SUCCESS` generation, in commit order) together
with the state left in the bucket (backlog, lock, `_BACKFILL`).
"""

from __future__ import annotations

import json
import random

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.core.clock import SystemClock
from turnstile.jobs.inline import InlineRunner
from turnstile.jobs.port import JobState
from turnstile.protocol import operator
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import LockState, Manifest
from turnstile.store.gcs import GcsStore
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectInfo


def backfill(host: Host) -> ObjectInfo | None:
    return host.store.inner.stat(f"{TABLE}/_BACKFILL")


def rels(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(1, count + 1)]


def events_for(host: Host, suffix: str) -> list[tuple[str, int]]:
    return [e for e in host.events if e[0].endswith(suffix)]


def assert_settled(host: Host) -> None:
    """Nothing pending: empty backlog, a FREE lock, no `_BACKFILL`, no unfinished job."""
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE
    assert backfill(host) is None
    assert isinstance(host.runner, InlineRunner) and host.runner.pending() == []


# The original loader's "life of a table"


def test_a_batch_published_without_a_backfill_starts_a_subscriber_that_drains_and_exits(host: Host) -> None:
    host.upload(f"{TABLE}/_config/ORDERME")
    generation = host.put_batch(f"{TABLE}/incremental/2024/05/01/13")
    assert backfill(host) is None
    host.deliver(*host.events.popleft())  # ORDERME: a config object, ignored
    host.deliver(*host.events.popleft())  # the data file: ignored
    success = host.events.popleft()
    assert success == (f"{TABLE}/incremental/2024/05/01/13/_SUCCESS", generation)
    assert host.deliver(*success) == 200
    # The publisher wrote the pointer, then created _BACKFILL; nothing is applied yet.
    assert host.backlog(TABLE) == ["incremental/2024/05/01/13"]
    assert backfill(host) is not None
    assert host.applied(TABLE) == []
    assert [n for n, _ in host.events if "_claimed_" not in n] == [
        f"{TABLE}/_backlog/incremental/2024/05/01/13/_SUCCESS",
        f"{TABLE}/_BACKFILL",
    ]
    host.drain()
    assert host.tables.commits[TABLE] == [("incremental/2024/05/01/13", generation)]
    assert_settled(host)
    history = host.lock(TABLE)
    assert history.position == "incremental/2024/05/01/13"
    assert len(history.history) == 1


def test_a_batch_published_while_a_backfill_exists_is_taken_by_the_run_of_that_backfill(host: Host) -> None:
    host.upload(f"{TABLE}/_config/ORDERME")
    live = host.upload(f"{TABLE}/_BACKFILL")  # a run is scheduled and has not looked at the backlog yet
    generation = host.put_batch(f"{TABLE}/01")
    backfill_event = (f"{TABLE}/_BACKFILL", live)
    success_event = (f"{TABLE}/01/_SUCCESS", generation)
    assert backfill_event in host.events and success_event in host.events
    host.events.clear()
    assert host.deliver(*success_event) == 200
    # The pointer is queued and the existing _BACKFILL is left alone: no second run is started.
    assert host.backlog(TABLE) == ["01"]
    found = backfill(host)
    assert found is not None and found.generation == live
    assert events_for(host, "/_BACKFILL") == []
    host.drain()  # the pointer's event only re-checks _BACKFILL
    assert host.applied(TABLE) == []
    host.events.append(backfill_event)  # now the scheduled run starts
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert_settled(host)


def test_a_batch_arriving_after_the_subscriber_exited_starts_a_new_run(host: Host) -> None:
    host.upload(f"{TABLE}/_config/ORDERME")
    first = put_all(host, ["01", "02"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(first, ["01", "02"])
    assert_settled(host)
    lock_before = host.store.inner.stat(f"{TABLE}/_bqlock")
    later = put_all(host, ["03"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(first | later, ["01", "02", "03"])
    assert_settled(host)
    lock_after = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert lock_before is not None and lock_after is not None
    assert lock_after.generation > lock_before.generation
    assert host.lock(TABLE).position == "03"


def test_a_batch_arriving_while_a_job_runs_is_applied_after_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    first = put_all(host, ["2024/05/01/10"])
    host.drain()
    [job] = host.runner.pending()
    lock = host.lock(TABLE)
    assert lock.state is LockState.RUNNING and lock.job_id == job
    assert [c.rel for c in lock.covers] == ["2024/05/01/10"]
    # Two more batches land while the job runs; the second one's events come first.
    later = put_all(host, ["2024/05/01/11", "2024/05/01/12"])
    host.drain(rng=random.Random(3))
    assert host.runner.pending() == [job]  # nothing new started while the table is held
    assert host.lock(TABLE).job_id == job
    assert host.backlog(TABLE) == ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"]
    assert host.applied(TABLE) == []
    host.runner.run(job)
    host.drain()
    [second] = host.runner.pending()
    assert host.applied(TABLE) == ["2024/05/01/10"]
    held = host.lock(TABLE)
    assert held.job_id == second and [c.rel for c in held.covers] == ["2024/05/01/11", "2024/05/01/12"]
    assert host.backlog(TABLE) == ["2024/05/01/11", "2024/05/01/12"]
    host.runner.run(second)
    host.drain()
    generations = first | later
    assert host.tables.commits[TABLE] == commits_in(generations, sorted(generations))
    assert_settled(host)
    assert host.runner.submitted == [job, second]


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 11])
def test_shuffled_and_duplicated_events_apply_every_batch_once_in_order(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    host = start_host(monkeypatch, MemoryStore("shuffled"), ORDERED)
    rng = random.Random(seed)
    batches = rels("2024/05/01/", 8)
    generations = put_all(host, batches)
    host.drain(rng=rng, duplicates=0.4)
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert_settled(host)
    assert host.log_records() and not [r for r in host.log_records() if r["severity"] == "ERROR"]


@pytest.mark.parametrize("seed", [0, 3])
def test_shuffled_events_on_the_emulator(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, seed: int
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    batches = rels("b", 5)
    generations = put_all(host, batches)
    host.drain(rng=random.Random(seed), duplicates=0.3)
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert_settled(host)


@pytest.mark.parametrize("seed", range(4))
def test_shuffled_events_with_slow_jobs_keep_the_order(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Jobs run between deliveries, at random moments: events and job ends interleave."""
    host = start_host(monkeypatch, MemoryStore("slow"), ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    rng = random.Random(seed)
    batches = rels("2024/06/", 10)
    generations: dict[str, int] = {}
    for rel in batches:
        generations[rel] = host.put_batch(f"{TABLE}/{rel}")
        for _ in range(rng.randrange(3)):
            if host.events:
                host.events.rotate(-rng.randrange(len(host.events)))
                host.deliver(*host.events.popleft())
        if host.runner.pending() and rng.random() < 0.5:
            host.runner.run(host.runner.pending()[0])
    for _ in range(50):
        host.drain(rng=rng, duplicates=0.3)
        if not host.runner.pending():
            break
        host.runner.run(host.runner.pending()[0])
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert_settled(host)


def test_late_success_events_inside_a_coalesced_job_are_not_jumped_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """01, 02, 03 are uploaded in order; the event of 02 is delayed. One job may cover several
    batches, but it must not apply 01 and 03 and leave 02 (whose `_SUCCESS` exists) behind."""
    host = start_host(monkeypatch, MemoryStore("gap"), ORDERED)
    generations = put_all(host, ["01", "02", "03"])
    delayed = (f"{TABLE}/02/_SUCCESS", generations["02"])
    host.events.remove(delayed)
    host.drain()
    host.events.append(delayed)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert host.lock(TABLE).state is LockState.FREE
    assert_settled(host)


def test_orderme_below_the_table_orders_incrementals_only(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    host.upload(f"{TABLE}/incremental/_config/ORDERME")
    incremental = put_all(host, ["incremental/2024/05/01/00", "incremental/2024/05/01/01"])
    historical = put_all(host, ["historical/2019", "historical/2020", "historical/2021"])
    host.drain(rng=random.Random(1), duplicates=0.2)
    # One ordered job holds the table for the first incremental (and the second, if its pointer was
    # there in time); every historical batch got its own job at once, while the table was held.
    lock = host.lock(TABLE)
    assert lock.state is LockState.RUNNING
    assert lock.covers[0].rel == "incremental/2024/05/01/00"
    assert host.backlog(TABLE) == ["incremental/2024/05/01/00", "incremental/2024/05/01/01"]
    assert len(host.runner.pending()) == 1 + len(historical)
    ordered_job = lock.job_id
    assert ordered_job is not None
    for job in host.runner.pending():
        if job != ordered_job:
            host.runner.run(job)
    host.drain()
    assert sorted(host.applied(TABLE)) == sorted(historical)
    assert host.runner.pending() == [ordered_job]  # the incrementals still wait for their job
    assert host.lock(TABLE).job_id == ordered_job
    while host.runner.pending():
        host.runner.run(host.runner.pending()[0])
        host.drain()
    applied = host.applied(TABLE)
    assert applied[len(historical) :] == ["incremental/2024/05/01/00", "incremental/2024/05/01/01"]
    assert sorted(host.tables.commits[TABLE]) == sorted(
        commits_in(incremental | historical, list(incremental | historical))
    )
    assert_settled(host)
    assert all(not rel.startswith("historical") for rel in host.backlog(TABLE))


# START_BACKFILL_FILENAME


def test_history_gate_holds_batches_until_the_gate_file_then_applies_them_sorted(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/ORDERME")
    batches = rels("historical/2024/01/", 6)
    upload_order = batches[:]
    random.Random(4).shuffle(upload_order)
    assert upload_order != batches
    generations = put_all(host, upload_order)
    host.drain(rng=random.Random(2), duplicates=0.3)
    assert host.applied(TABLE) == []
    assert host.backlog(TABLE) == batches
    assert backfill(host) is None
    assert host.store.inner.stat(f"{TABLE}/_bqlock") is None
    held = [r for r in host.log_records() if r.get("gate") == "_HISTORYDONE"]
    assert held and all(r["table"] == TABLE for r in held)
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert_settled(host)
    # After the gate, a new incremental is applied directly.
    late = put_all(host, ["incremental/2024/02/01"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations | late, [*batches, "incremental/2024/02/01"])
    assert_settled(host)


# WAIT_FOR_VALIDATION


def test_wait_for_validation_applies_one_batch_per_backfill(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED | {"WAIT_FOR_VALIDATION": "true"})
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 10}).encode())
    batches = rels("2024/05/", 4)
    generations = put_all(host, batches)
    host.drain(rng=random.Random(0), duplicates=0.3)
    assert host.tables.commits[TABLE] == commits_in(generations, batches[:1])
    assert host.backlog(TABLE) == batches[1:]
    assert backfill(host) is not None  # kept: the next go-ahead is a NEW generation
    inv = invocation(host)
    for done in range(2, len(batches) + 1):
        host.deliver(f"{TABLE}/_BACKFILL", backfill(host).generation)  # type: ignore[union-attr]
        host.drain()  # a redelivered old _BACKFILL is no go-ahead
        assert host.applied(TABLE) == batches[: done - 1]
        operator.resume(inv, table(host))
        host.drain(rng=random.Random(done), duplicates=0.5)
        assert host.tables.commits[TABLE] == commits_in(generations, batches[:done])
        assert host.backlog(TABLE) == batches[done:]
        assert host.lock(TABLE).state is LockState.FREE
    assert len(host.runner.submitted) == len(batches)  # type: ignore[attr-defined]
    operator.resume(inv, table(host))
    host.drain()
    assert_settled(host)


# Coalescing


def test_coalescing_applies_seven_batches_in_three_jobs_one_commit_each(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 3}).encode())
    batches = rels("2024/05/01/", 7)
    generations = put_all(host, batches)
    host.drain(rng=random.Random(9))
    assert host.backlog(TABLE) == batches and host.applied(TABLE) == []
    assert isinstance(host.runner, InlineRunner)
    submit, told = host.runner.submit, list[bool]()

    def recording(job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        told.append(more_queued)
        submit(job_id, manifest_uri, more_queued=more_queued)

    monkeypatch.setattr(host.runner, "submit", recording)
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert len(host.runner.submitted) == 3
    assert told == [True, True, False]  # the runner is told when more of the backlog waits behind a job
    assert host.lock(TABLE).history == tuple(host.runner.submitted)
    applied = [r for r in host.log_records() if r.get("message") == "job applied"]
    assert [r["rels"] for r in applied] == [batches[0:3], batches[3:6], batches[6:7]]
    assert_settled(host)


def test_the_byte_budget_cuts_a_job_short_and_a_batch_larger_than_it_still_goes_alone(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/ORDERME")
    budget = {"max_batches_per_job": 10, "max_bytes_per_job": 12}
    host.upload(f"{TABLE}/_config/load.json", json.dumps(budget).encode())
    batches = rels("2024/05/01/", 6)
    generations = {rel: host.put_batch(f"{TABLE}/{rel}", rows=1) for rel in batches[:4]}  # 5 bytes each
    generations[batches[4]] = host.put_batch(f"{TABLE}/{batches[4]}", rows=10)  # 23 bytes: over budget
    generations[batches[5]] = host.put_batch(f"{TABLE}/{batches[5]}", rows=1)
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    applied = [r for r in host.log_records() if r.get("message") == "job applied"]
    assert [r["rels"] for r in applied] == [batches[0:2], batches[2:4], batches[4:5], batches[5:6]]
    manifests = [
        m for m in host.store.inner.list_objects(f"{TABLE}/_turnstile/jobs/") if "manifest" in m.name
    ]
    decoded = [Manifest.decode(host.store.inner.read(m.name).data, "manifest") for m in manifests]  # type: ignore[union-attr]
    sizes = sorted(tuple(b.data_sizes for b in m.batches) for m in decoded)  # the listing's, carried
    assert sizes == [((5,),), ((5,), (5,)), ((5,), (5,)), ((23,),)]
    assert_settled(host)


def test_a_failure_inside_a_coalesced_job_keeps_what_was_committed_and_blocks_on_the_failed_batch(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 3}).encode())
    batches = ["a", "b", "c"]
    generations = put_all(host, batches)
    host.drain()
    host.tables.failing.add("b")
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a"])
    assert host.backlog(TABLE) == ["b", "c"]
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED
    assert lock.failed_rel == "b"
    assert lock.position == "a"
    assert lock.error is not None and "injected failure of 'b'" in lock.error
    assert [c.rel for c in lock.covers] == ["b"]
    assert isinstance(host.runner, InlineRunner) and len(host.runner.submitted) == 1
    assert lock.job_id == host.runner.submitted[0]
    blocked = [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert len(blocked) == 1 and blocked[0]["rel"] == "b" and blocked[0]["severity"] == "ERROR"
    # Fixed upstream: the operator unlocks and b, then c, are applied (a once).
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert_settled(host)


def test_publisher_and_exiting_subscriber_race_loses_no_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The original design's empty-backlog race: the subscriber saw an empty backlog and is about to
    delete `_BACKFILL` when a batch is published (its publisher sees the old `_BACKFILL` and does nothing)."""
    fired: list[int] = []

    class Racing(MemoryStore):
        host: Host | None = None

        def delete(self, name: str, *, if_generation: int) -> None:
            if name == f"{TABLE}/_BACKFILL" and not fired and self.host is not None:
                fired.append(self.host.put_batch(f"{TABLE}/02"))
                success = (f"{TABLE}/02/_SUCCESS", fired[0])
                self.host.events.remove(success)
                assert self.host.deliver(*success) == 200  # the publisher, in between
            super().delete(name, if_generation=if_generation)

    inner = Racing("race")
    host = start_host(monkeypatch, inner, ORDERED)
    inner.host = host
    first = put_all(host, ["01"])
    host.drain()
    assert fired, "the race was not provoked"
    assert host.tables.commits[TABLE] == [("01", first["01"]), ("02", fired[0])]
    assert_settled(host)


# Re-uploads


def test_a_flat_ordered_table_applies_every_success_generation_in_turn(host: Host) -> None:
    """`<ds>/<tbl>/_SUCCESS`: every batch has the rel "" and each upload is a new generation."""
    host.upload(f"{TABLE}/_config/ORDERME")
    generations = []
    for _ in range(3):
        generations.append(host.put_batch(TABLE))
        host.drain()
    assert host.tables.commits[TABLE] == [("", g) for g in generations]
    assert_settled(host)
    assert host.lock(TABLE).position == ""


def test_a_re_uploaded_last_batch_is_applied_again_an_earlier_one_blocks(host: Host) -> None:
    host.upload(f"{TABLE}/_config/ORDERME")
    generations = put_all(host, ["01", "02"])
    host.drain()
    again = host.upload(f"{TABLE}/02/_SUCCESS")  # corrected data for the latest batch: no order broken
    host.drain()
    assert host.tables.commits[TABLE] == [*commits_in(generations, ["01", "02"]), ("02", again)]
    assert_settled(host)
    late = host.upload(f"{TABLE}/01/_SUCCESS")  # 02 was applied after 01: re-applying 01 now breaks the order
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "01"
    # It was applied once already: most likely a duplicate upload, which `unlock` would apply twice.
    assert lock.error is not None and f"'01' was uploaded again (_SUCCESS generation {late})" in lock.error
    assert f"it was already applied: generation {generations['01']} committed at " in lock.error
    assert lock.error.index("--skip-head") < lock.error.index("if its data changed")
    assert len(host.tables.commits[TABLE]) == 3


@pytest.mark.parametrize("seed", range(4))
def test_the_gate_file_may_arrive_before_the_events_of_the_batches_it_releases(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Upstream writes every historical batch, then the gate; Eventarc delivers all of it shuffled."""
    host = start_host(monkeypatch, MemoryStore("gate"), ORDERED | {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 4}).encode())
    batches = rels("historical/2023/", 9)
    upload_order = batches[:]
    random.Random(seed).shuffle(upload_order)
    generations = put_all(host, upload_order)
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain(rng=random.Random(seed), duplicates=0.3)
    assert host.tables.commits[TABLE] == commits_in(generations, batches)
    assert not [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert_settled(host)


def test_a_done_signal_ends_the_job_even_while_the_runner_still_calls_it_running(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The driver writes its done signal before its process ends (on Dataproc the batch stays
    RUNNING a while longer): the signal's event must finish the job, not wait for the sweeper."""
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    put_all(host, ["01", "02"])
    host.drain()
    runner = host.runner
    assert isinstance(runner, InlineRunner)
    [job_id] = runner.pending()
    manifest = host.lock(TABLE).manifest
    assert manifest is not None
    execute(
        host.store, read_manifest(host.store, f"gs://{host.bucket}/{manifest}"), host.tables, SystemClock()
    )
    assert runner.status(job_id).state is JobState.PENDING  # type: ignore[union-attr]
    host.drain()  # the done signal's event
    assert host.applied(TABLE) == ["01", "02"]
    assert host.lock(TABLE).state is LockState.FREE
    assert host.backlog(TABLE) == []
