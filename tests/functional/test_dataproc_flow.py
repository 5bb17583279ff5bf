"""The deployed path: functions/main.py with the REAL Dataproc runner against the REST API stub.

Nothing is replaced but the service itself: CloudEvents go through functions-framework to
functions/main.py, settings choose the runner (`JOB_RUNNER=dataproc`, DATAPROC_ENDPOINT pointing
at the stub), `turnstile.entrypoints.wiring` builds `DataprocRunner` with its genuine REST client,
and the bucket is fake-gcs-server. The stub plays Dataproc's part of a batch: `play` runs the
manifest a batch was created with through the same bucket-side execution as the PySpark job
(`turnstile.state.execution`, an in-memory table as applier), which writes the result records and
the done signal whose events wake the subscriber's finish path, then moves the batch to SUCCEEDED
or FAILED as Dataproc would.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from tests.contract.dataproc_stub import DataprocStub, invalid_ids
from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, put_all
from turnstile.core.clock import SystemClock
from turnstile.core.errors import BatchFailed
from turnstile.jobs.inline import MemoryTables
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore

PROJECT, REGION = "proj-1", "europe-west1"


@pytest.fixture
def stub() -> Iterator[DataprocStub]:
    server = DataprocStub().start()
    yield server
    server.stop()


def dataproc_env(stub: DataprocStub, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "JOB_RUNNER": "dataproc",
        "DATAPROC_ENDPOINT": stub.url,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "DATAPROC_REGION": REGION,
        "JOB_MAIN_URI": "gs://deploy/turnstile/job_main.py",
        "ICEBERG_CATALOG_TYPE": "hadoop",
        "ICEBERG_WAREHOUSE": "gs://warehouse/iceberg",
        **(extra or {}),
    }


def play(stub: DataprocStub, host: Host) -> int:
    """Dataproc's part: run every PENDING batch's manifest to its end; return how many ran."""
    ran = stub.pending()
    for batch_id in ran:
        stub.set_state(batch_id, "RUNNING")
        try:
            done = execute(
                host.store, read_manifest(host.store, stub.manifest_of(batch_id)), host.tables, SystemClock()
            )
        except BatchFailed as exc:
            stub.set_state(batch_id, "FAILED", str(exc))
            continue
        stub.set_state(batch_id, "SUCCEEDED" if done.succeeded else "FAILED", done.error or "")
    return len(ran)


def settle(stub: DataprocStub, host: Host, rng: random.Random | None = None) -> None:
    """Deliver events and run batches until neither is left."""
    for _ in range(100):
        host.drain(rng=rng, duplicates=0.2 if rng else 0.0)
        if not play(stub, host):
            return
    raise AssertionError("the flow does not settle")


def created_ids(stub: DataprocStub) -> list[tuple[str, str]]:
    creates = stub.sent("POST", rf"/v1/projects/{PROJECT}/locations/{REGION}/batches")
    return [(c.query["batchId"], c.query["requestId"]) for c in creates]


def test_an_ordered_flow_through_the_dataproc_runner(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, stub: DataprocStub
) -> None:
    host = start_host(
        monkeypatch, gcs_store, dataproc_env(stub, ORDERED), tables=MemoryTables(), runner_from_settings=True
    )
    order = ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"]
    generations = put_all(host, order)
    settle(stub, host, random.Random(7))
    # A batch that arrives while the table is idle starts a job of its own.
    generations |= put_all(host, ["2024/05/01/13"])
    settle(stub, host)

    assert host.tables.commits[TABLE] == commits_in(generations, [*order, "2024/05/01/13"])
    assert host.lock(TABLE).state is LockState.FREE
    assert host.backlog(TABLE) == []
    assert all(status < 500 for _, _, status in host.delivered)
    # Every job went through the API, under ids it accepts; all of them finished.
    ids = created_ids(stub)
    assert ids and all(invalid_ids(*pair) is None for pair in ids)
    assert {stored.resource["state"] for stored in stub.batches.values()} == {"SUCCEEDED"}
    assert host.lock(TABLE).history[-1] in stub.batches
    # The subscriber asked the service about its jobs through the same client.
    assert stub.sent("GET", rf"/v1/projects/{PROJECT}/locations/{REGION}/batches/[^/]+")


def test_an_unordered_flow_through_the_dataproc_runner(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, stub: DataprocStub
) -> None:
    host = start_host(
        monkeypatch, gcs_store, dataproc_env(stub), tables=MemoryTables(), runner_from_settings=True
    )
    host.tables.failing.add("2024/05/01/12")
    generations = put_all(host, ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"])
    other = {"sales/orders/2024/05/01/10": host.put_batch("sales/orders/2024/05/01/10")}
    settle(stub, host, random.Random(3))

    assert sorted(host.tables.commits[TABLE]) == commits_in(generations, ["2024/05/01/10", "2024/05/01/11"])
    assert host.tables.commits["sales/orders"] == [("2024/05/01/10", other["sales/orders/2024/05/01/10"])]
    # One batch per `_SUCCESS` generation, whatever the duplicates; each finished as its job did.
    states = sorted(stored.resource["state"] for stored in stub.batches.values())
    assert states == ["FAILED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]
    assert all(invalid_ids(*pair) is None for pair in created_ids(stub))
    assert all(status < 500 for _, _, status in host.delivered)
    # The failed job's done signal reached the handler, which reported it.
    [failed] = [r for r in host.log_records() if r.get("event") == "batch_failed"]
    assert "2024/05/01/12" in failed["error"]
    assert failed["job_id"] in stub.batches
    # A duplicate event finds the batch through the API and submits nothing.
    before = len(created_ids(stub))
    host.deliver(f"{TABLE}/2024/05/01/10/_SUCCESS", generations["2024/05/01/10"])
    assert len(created_ids(stub)) == before


def _run_writing(stub: DataprocStub, host: Host, done_body: bytes | None, result_body: bytes | None) -> None:
    """Dataproc's part for the one pending batch, with its done signal (None: lost) and result
    records (None: as written) replaced: written by another version, or by hand."""
    [batch_id] = stub.pending()
    manifest = read_manifest(host.store, stub.manifest_of(batch_id))
    done = execute(host.store.inner, manifest, host.tables, SystemClock())  # inner: no events yet
    if result_body is not None:
        for batch in manifest.batches:
            host.store.inner.write(batch.result, result_body)
    stub.set_state(batch_id, "SUCCEEDED" if done.succeeded else "FAILED")
    if done_body is None:
        host.store.inner.remove(manifest.done_signal)
    else:
        host.store.write(manifest.done_signal, done_body)


def test_a_done_signal_that_does_not_decode_is_read_from_the_job_service_and_the_records(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, stub: DataprocStub
) -> None:
    host = start_host(
        monkeypatch, gcs_store, dataproc_env(stub, ORDERED), tables=MemoryTables(), runner_from_settings=True
    )
    generations = put_all(host, ["2024/05/01/10", "2024/05/01/11"])
    host.drain()
    _run_writing(stub, host, done_body=b"\x00not a done signal", result_body=None)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["2024/05/01/10", "2024/05/01/11"])
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []
    assert not [r for r in host.log_records() if r.get("event") == "rejected"]
    warned = [r for r in host.log_records() if r.get("event") == "record_unreadable"]
    assert warned and all(".done" in str(w["message"]) and "job service" in str(w["message"]) for w in warned)


def test_a_result_record_that_does_not_decode_counts_as_not_applied_and_the_retry_records_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, stub: DataprocStub
) -> None:
    host = start_host(
        monkeypatch, gcs_store, dataproc_env(stub, ORDERED), tables=MemoryTables(), runner_from_settings=True
    )
    host.upload(f"{TABLE}/_config/load.json", b'{"job_retry_backoff_seconds": 1}')
    generations = put_all(host, ["2024/05/01/10"])
    host.drain()
    # The job committed, its record is garbage and its done signal was lost: the sweeper finds it ended.
    _run_writing(stub, host, done_body=None, result_body=b"{not json")
    lock = host.lock(TABLE)
    assert lock.state is LockState.RUNNING
    host.store.write(TABLE + "/_BACKFILL", b"{}")  # what the sweeper's watchdog does for a job that ended
    host.drain()
    retried = host.lock(TABLE)
    assert retried.state is LockState.FREE and retried.retry_at is not None  # transient: retried
    time.sleep(max(0.0, retried.retry_at.timestamp() - time.time()) + 0.05)
    host.store.write(TABLE + "/_BACKFILL", b"{}")
    host.drain()
    play(stub, host)
    host.drain()
    # Applied once: the retry found the commit (SKIPPED) and wrote a readable record.
    assert host.tables.commits[TABLE] == commits_in(generations, ["2024/05/01/10"])
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []
    generation = generations["2024/05/01/10"]
    found = host.store.inner.read(f"{TABLE}/_turnstile/results/2024/05/01/10/{generation}.json")
    assert found is not None and b'"outcome":"SKIPPED"' in found.data.replace(b" ", b"")
