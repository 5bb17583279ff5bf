"""The sweeper: the fallback that keeps every table moving when an event is lost.

It is called by Cloud Scheduler through the HTTP function `sweep`; here both the library call and
the HTTP entrypoint are exercised. It must restart what stalled, never unlock a FAILED table, and
delete claims nobody needs any more.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from functions_framework import create_app

from tests.contract.test_gcs_transient import FlakyStorage
from tests.functional.harness import ROOT, Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, has_backfill, invocation, put_all, table
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.entrypoints import entry, wiring
from turnstile.jobs.inline import InlineRunner
from turnstile.jobs.port import JobState, JobStatus
from turnstile.names.paths import Table
from turnstile.protocol import operator, sweeper
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.memory import MemoryStore


class ManualClock:
    """A clock the test moves; starts at the real time so it agrees with the functions' clock."""

    def __init__(self) -> None:
        self.current = datetime.now(UTC)

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


def drop_done_signals(host: Host) -> list[tuple[str, int]]:
    """Lose every queued job-done event (Eventarc dropped them, or the function crashed)."""
    lost = [e for e in host.events if "/_turnstile/jobs/" in e[0] and e[0].endswith(".done")]
    for event in lost:
        host.events.remove(event)
    return lost


def only(report: list[dict[str, Any]], prefix: str = TABLE) -> dict[str, Any]:
    [found] = [r for r in report if r["table"].endswith(f"/{prefix}")]
    return found


def assert_settled(host: Host) -> None:
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE
    assert not has_backfill(host)
    assert isinstance(host.runner, InlineRunner) and host.runner.pending() == []


def sweep_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    del monkeypatch  # the host already patched wiring; the HTTP function builds clients through it
    app = create_app(target="sweep", source=str(ROOT / "functions" / "main.py"), signature_type="http")
    return app.test_client()


# A lost job-done event


def test_a_lost_job_done_event_is_recovered_by_the_sweeper(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 1}).encode())
    generations = put_all(host, ["01", "02"])
    host.drain()
    [job] = host.runner.pending()
    host.runner.run(job)
    assert len(drop_done_signals(host)) == 1
    host.drain()
    # Stuck: the job ended, nobody noticed.
    lock = host.lock(TABLE)
    assert lock.state is LockState.RUNNING and lock.job_id == job
    status = host.runner.status(job)
    assert status is not None and status.state is JobState.SUCCEEDED
    assert host.applied(TABLE) == ["01"]
    assert host.backlog(TABLE) == ["01", "02"]
    report = sweeper.sweep(invocation(host))
    assert only(report)["verdict"] == "wake" and only(report)["lock"] == "RUNNING"
    assert [r for r in host.log_records() if r.get("event") == "subscriber_restarted"]
    host.drain()
    [second] = host.runner.pending()
    assert host.lock(TABLE).job_id == second
    assert host.backlog(TABLE) == ["02"]
    host.runner.run(second)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert_settled(host)
    # A healthy table is left alone.
    writes = host.store.ops["write"] + host.store.ops["create"]
    assert only(sweeper.sweep(invocation(host)))["verdict"] == "ok"
    assert host.store.ops["write"] + host.store.ops["create"] == writes
    assert not host.events


def test_the_http_sweep_entrypoint_recovers_a_lost_job_done_event(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    generations = put_all(host, ["01"])
    host.drain()
    [job] = host.runner.pending()
    host.runner.run(job)
    drop_done_signals(host)
    host.drain()
    assert host.lock(TABLE).state is LockState.RUNNING
    client = sweep_client(monkeypatch)
    answer = client.post("/", json={"buckets": [host.bucket]})
    assert answer.status_code == 200
    body = answer.get_json()
    assert only(body["tables"])["verdict"] == "wake"
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    assert_settled(host)
    for bad in ({}, {"buckets": []}, {"buckets": "b"}, {"buckets": [1]}):
        refused = client.post("/", json=bad)
        assert refused.status_code == 400
        assert "buckets" in refused.get_data(as_text=True)
    assert client.post("/", data="not json").status_code == 400


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[]", "a JSON array"),
        ('["b"]', "a JSON array"),
        ('"b"', "a JSON string"),
        ("42", "a JSON number"),
        ("true", "a JSON boolean"),
        ("null", "not JSON"),
        ("{not json", "not JSON"),
        ('{"buckets": [""]}', '"buckets" must be a non-empty list'),
    ],
)
def test_the_http_sweep_answers_a_malformed_body_with_400_saying_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, body: str, problem: str
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    answer = sweep_client(monkeypatch).post("/", data=body, content_type="application/json")
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert problem in error
    assert '{"buckets": ["BUCKET", ...]}' in error  # what to send instead
    assert host.store.ops == {}


def test_the_http_sweep_reports_a_storage_refusal_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """A bucket the sweeper may not list (403 from the storage API, here a real HTTP server behind
    the real client): a 500 whose body and ERROR log say which bucket and what to grant."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    handler = type("Refusing", (FlakyStorage,), {"seen": 0, "failures": 10_000, "status": 403})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setattr(
            wiring, "object_store", lambda settings, bucket: GcsStore(make_client("p", url), bucket)
        )
        answer = sweep_client(monkeypatch).post("/", json={"buckets": ["forbidden-bucket"]})
    finally:
        server.shutdown()
    assert answer.status_code == 500
    error = answer.get_json()["error"]
    assert "gs://forbidden-bucket/" in error and "refused access" in error and "storage.objectUser" in error
    [record] = [r for r in host.log_records() if r.get("event") == "sweep_refused"]
    assert record["severity"] == "ERROR" and record["error"] == error
    assert "Traceback" not in host.log.getvalue()


def test_the_http_sweep_of_a_bucket_that_does_not_exist_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """A scheduler body naming a missing bucket (fake-gcs-server answers its listing with 404): the
    ERROR `sweep_refused` that docs/DEPLOY.md's alert table promises, naming the bucket."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    client = gcs_store._client  # the emulator's client, on a bucket that was never created
    monkeypatch.setattr(wiring, "object_store", lambda settings, bucket: GcsStore(client, bucket))
    answer = sweep_client(monkeypatch).post("/", json={"buckets": ["nope-bucket"]})
    assert answer.status_code == 500
    error = answer.get_json()["error"]
    assert "the bucket gs://nope-bucket does not exist" in error and "check the bucket name" in error
    [record] = [r for r in host.log_records() if r.get("event") == "sweep_refused"]
    assert record["severity"] == "ERROR" and record["error"] == error
    assert "Traceback" not in host.log.getvalue()


def test_a_lost_job_done_event_under_wait_for_validation_is_no_go_ahead(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The sweeper's `_BACKFILL` finishes the job; it must not also stand for a human's validation."""
    host = start_host(monkeypatch, gcs_store, ORDERED | {"WAIT_FOR_VALIDATION": "true"}, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    generations = put_all(host, ["01", "02", "03"])
    host.drain()
    [job] = host.runner.pending()
    host.runner.run(job)
    drop_done_signals(host)
    host.drain()
    assert only(sweeper.sweep(invocation(host)))["verdict"] == "wake"
    host.drain()
    assert host.applied(TABLE) == ["01"]
    assert host.lock(TABLE).state is LockState.FREE
    assert host.runner.pending() == []  # 02 waits for validation
    # Later sweeps see a paused table, not a stalled one, even long after.
    later = ManualClock()
    later.sleep(3600)
    for clock in (None, later):
        report = sweeper.sweep(invocation(host, clock))
        assert only(report)["verdict"] == "ok"
        host.drain()
        assert host.runner.pending() == []
    operator.resume(invocation(host), table(host))  # the human go-ahead
    host.drain()
    [second] = host.runner.pending()
    host.runner.run(second)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert host.backlog(TABLE) == ["03"]


# A stalled backlog


def test_a_backlog_without_backfill_is_restarted(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generation = host.put_batch(f"{TABLE}/01")
    success = (f"{TABLE}/01/_SUCCESS", generation)
    host.events.clear()
    assert host.deliver(*success) == 200  # pointer written, _BACKFILL created ...
    assert host.backlog(TABLE) == ["01"] and has_backfill(host)
    host.events.clear()  # ... but neither event arrives,
    assert host.store.inner.remove(f"{TABLE}/_BACKFILL")  # and the _BACKFILL is gone too
    report = sweeper.sweep(invocation(host))
    assert only(report)["verdict"] == "wake"
    assert has_backfill(host)
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert_settled(host)


def test_a_backfill_whose_run_never_came_is_restarted_after_the_lease(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generation = host.put_batch(f"{TABLE}/01")
    host.events.clear()
    host.deliver(f"{TABLE}/01/_SUCCESS", generation)
    assert has_backfill(host)
    host.events.clear()  # the _BACKFILL event is lost
    assert only(sweeper.sweep(invocation(host)))["verdict"] == "ok"  # its event may be on the way
    assert not host.events
    later = ManualClock()
    later.sleep(Settings.from_env().function_timeout_sec + 1)
    assert only(sweeper.sweep(invocation(host, later)))["verdict"] == "wake"
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert_settled(host)


class SubmitFailsOnce:
    def __init__(self, inner: InlineRunner) -> None:
        self.inner = inner
        self.failed = False

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the function's instance stopped while submitting")
        self.inner.submit(job_id, manifest_uri)

    def status(self, job_id: str) -> JobStatus | None:
        return self.inner.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.inner.cancel(job_id)


def test_a_lock_whose_job_was_never_submitted_is_woken_after_the_lease(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The function crashed between locking the table and submitting the job, and its event was
    never redelivered (retries off)."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    assert isinstance(host.runner, InlineRunner)
    runner = SubmitFailsOnce(host.runner)
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    generations = put_all(host, ["01"])
    while host.events:  # deliver, without redelivery
        host.deliver(*host.events.popleft())
    lock = host.lock(TABLE)
    assert lock.state is LockState.RUNNING and lock.job_id is not None
    assert host.runner.status(lock.job_id) is None
    assert host.applied(TABLE) == []
    assert only(sweeper.sweep(invocation(host)))["verdict"] == "ok"  # the locker may still be alive
    later = ManualClock()
    later.sleep(Settings.from_env().function_timeout_sec + 1)
    assert only(sweeper.sweep(invocation(host, later)))["verdict"] == "wake"
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    assert host.runner.submitted == [lock.job_id]  # the same job id: submitted once
    assert_settled(host)


# A FAILED table


def test_a_failed_table_is_reported_never_unlocked(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("02")
    put_all(host, ["01", "02", "03"])
    host.drain()
    before = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert before is not None and host.lock(TABLE).state is LockState.FAILED
    host.log.truncate(0)
    host.log.seek(0)
    later = ManualClock()
    later.sleep(600)
    for clock in (SystemClock(), later):
        report = only(sweeper.sweep(invocation(host, clock)))
        assert report["verdict"] == "blocked" and report["lock"] == "FAILED"
        host.drain()
    after = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert after is not None and after.generation == before.generation
    assert host.lock(TABLE).state is LockState.FAILED
    assert host.applied(TABLE) == ["01"]
    assert host.backlog(TABLE) == ["02", "03"]
    alerts = [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert len(alerts) == 2
    for alert in alerts:
        assert alert["severity"] == "ERROR"
        assert alert["table"] == TABLE and alert["rel"] == "02"
        assert "injected failure" in str(alert["error"])
        assert f"turnstile unlock gs://{host.bucket}/{TABLE}" in str(alert["message"])
    ages = [alert["lock_age_seconds"] for alert in alerts]
    assert isinstance(ages[0], float) and 0 <= ages[0] < 60
    assert 600 <= ages[1] < 660


# Claims


def test_stale_claims_are_deleted_and_fresh_ones_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    store = MemoryStore("claims", clock=clock)
    host = start_host(monkeypatch, store, ORDERED | {"STALE_CLAIM_SECONDS": "60"})
    other = Table(host.bucket, "ds/other", "ds", "other")
    put_all(host, ["01"])
    host.put_batch(f"{other.prefix}/2024")
    host.drain()
    old_claims = [o.name for o in store.list_objects("ds/") if "/_claimed_" in o.name]
    # Only subscriber runs are claimed (a `_SUCCESS` needs no claim: its effects are idempotent).
    assert {n.rsplit("/", 1)[-1].split("_created_at_")[0] for n in old_claims} == {"_claimed__BACKFILL"}
    clock.sleep(30)
    generations = put_all(host, ["02"])
    host.drain()
    fresh = [o.name for o in store.list_objects("ds/") if "/_claimed_" in o.name and o.name not in old_claims]
    assert fresh
    clock.sleep(31)  # the first claims are 61 s old, the second ones 31 s
    report = sweeper.sweep(invocation(host, clock))
    left = [o.name for o in store.list_objects("ds/") if "/_claimed_" in o.name]
    assert sorted(left) == sorted(fresh)
    assert sum(r["claims_deleted"] for r in report) == len(old_claims)
    assert only(report)["verdict"] == "ok" and only(report, "ds/other")["verdict"] == "ok"
    assert host.tables.commits[TABLE][1:] == commits_in(generations, ["02"])
    clock.sleep(60)
    sweeper.sweep(invocation(host, clock))
    assert [o.name for o in store.list_objects("ds/") if "/_claimed_" in o.name] == []


def test_a_duplicate_event_after_its_claim_was_swept_does_not_block_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At-least-once delivery: a copy of an old `_SUCCESS` event can arrive after the sweeper deleted
    its claim. The batch was applied: the copy must not be applied again nor block the table as late."""
    clock = ManualClock()
    store = MemoryStore("dup", clock=clock)
    host = start_host(monkeypatch, store, ORDERED | {"STALE_CLAIM_SECONDS": "60"})
    generations = put_all(host, ["01", "02"])
    host.drain()
    clock.sleep(120)
    sweeper.sweep(invocation(host, clock))
    assert [o.name for o in store.list_objects("ds/") if "/_claimed_" in o.name] == []
    host.deliver(f"{TABLE}/01/_SUCCESS", generations["01"])
    host.drain()
    generations |= put_all(host, ["03"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert not [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert_settled(host)


def test_a_duplicate_of_the_last_batch_after_its_claim_was_swept_is_not_applied_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = ManualClock()
    store = MemoryStore("dup-last", clock=clock)
    host = start_host(monkeypatch, store, ORDERED | {"STALE_CLAIM_SECONDS": "60"})
    generations = put_all(host, ["01", "02"])
    host.drain()
    clock.sleep(120)
    sweeper.sweep(invocation(host, clock))
    host.deliver(f"{TABLE}/02/_SUCCESS", generations["02"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert not [r for r in host.log_records() if r.get("event") == "table_blocked"]
    assert_settled(host)


# Reconciliation: batches whose events never came are published within one sweep


def _lose_events(host: Host) -> None:
    host.events.clear()  # the functions were down, misconfigured, or the notification was lost


@pytest.mark.parametrize("env", [ORDERED, {}], ids=["ordered", "unordered"])
def test_a_batch_whose_event_never_came_is_published_within_one_sweep(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, env: dict[str, str]
) -> None:
    host = start_host(monkeypatch, gcs_store, env)
    generations = put_all(host, ["01", "02"])
    host.drain()
    generations |= put_all(host, ["03", "04"])
    _lose_events(host)
    assert host.applied(TABLE) == ["01", "02"]
    report = only(sweeper.sweep(invocation(host)))
    assert report["reconciled"] == 2
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03", "04"])
    [first, second] = [r for r in host.log_records() if r.get("event") == "batch_reconciled"]
    assert first["object"].endswith(f"{TABLE}/03/_SUCCESS") and second["object"].endswith("04/_SUCCESS")
    # Nothing is published twice: the next sweep finds every batch handled.
    assert only(sweeper.sweep(invocation(host)))["reconciled"] == 0
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03", "04"])


def test_an_unordered_tables_reconciliation_listing_starts_at_its_first_open_batch(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    put_all(host, [f"{h:02d}" for h in range(6)])
    host.drain()
    sweeper.sweep(invocation(host))
    cursor = gcs_store.read(f"{TABLE}/_turnstile/cursor")
    assert cursor is not None and cursor.text() == f"{TABLE}/05/"  # all committed: the last batch
    generation = put_all(host, ["06"])["06"]
    _lose_events(host)
    before = host.store.ops["read"]
    assert only(sweeper.sweep(invocation(host)))["reconciled"] == 1
    assert host.store.ops["read"] - before < 12  # 05 and 06 looked at, not the whole table
    host.drain()
    assert host.tables.commits[TABLE][-1] == ("06", generation)


def test_batches_acknowledged_under_a_bad_setting_are_applied_once_it_is_fixed(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    entry.report_bad_settings.cache_clear()
    host = start_host(monkeypatch, gcs_store, ORDERED | {"JOB_PREFIX": "Not A Prefix"})
    generations = put_all(host, ["01", "02"])
    host.drain()
    assert host.applied(TABLE) == []
    assert [r["event"] for r in host.log_records() if r.get("event") == "settings_invalid"]
    monkeypatch.setenv("JOB_PREFIX", "turnstile")  # fixed and redeployed
    only(sweeper.sweep(invocation(host)))
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
