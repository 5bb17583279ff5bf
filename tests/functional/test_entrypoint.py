"""functions/main.py `on_object_finalized`: cheap for the objects it ignores, never a crash loop.

Every object written to the bucket fires the function (Eventarc cannot filter by name), state objects
included; most must return before any storage call. A payload that is not a storage object event can
never succeed, so it is logged and acknowledged rather than redelivered for 24 hours.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent

from tests.functional.harness import EVENT_TYPE, Host, cloud_event, start_host
from tests.functional.scenario import ORDERED, TABLE
from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import entry, wiring
from turnstile.jobs.port import JobRunner
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore
from turnstile.store.port import ObjectStore

IGNORED = [
    f"{TABLE}/2024/05/01/13/part-0.csv",  # a data file
    f"{TABLE}/2024/05/01/13/.part-0.csv.crc",
    f"{TABLE}/_config/load.json",  # config files, at any level
    f"{TABLE}/_config/ORDERME",
    "_config/load.json",
    f"{TABLE}/incremental/_config/transform.sql",
    f"{TABLE}/2024/05/01/13/_claimed__SUCCESS_created_at_17",  # claims
    f"{TABLE}/_claimed__BACKFILL_created_at_18",
    f"{TABLE}/_bqlock",  # the lock
    f"{TABLE}/_turnstile/results/2024/05/01/13/17.json",  # a result record
    f"{TABLE}/_turnstile/jobs/turnstile-ds-tbl-0123456789abcdef.manifest.json",  # a manifest
    f"{TABLE}/_failed/2024/05/01/13/rows.csv",  # rows set aside
    f"{TABLE}/_backlog/2024/05/01/13/part-0.csv",  # not a pointer
    f"{TABLE}/_config/_SUCCESS",  # a marker inside a reserved folder is no batch
    f"{TABLE}/_failed/2024/_SUCCESS",
]


def post(host: Host, data: Any, *, structured: bool = False) -> int:
    event = CloudEvent(
        {
            "type": EVENT_TYPE,
            "source": f"//storage.googleapis.com/projects/_/buckets/{host.bucket}",
            "subject": "objects/whatever",
        },
        data,
    )
    headers, body = (to_structured if structured else to_binary)(event)
    return int(host.client.post("/", headers=headers, data=body).status_code)


@pytest.mark.parametrize("name", IGNORED)
def test_objects_that_are_not_actions_are_ignored_without_a_storage_call(host: Host, name: str) -> None:
    generation = host.upload(name, b"{}")
    host.events.clear()
    host.store.ops.clear()
    assert (
        entry.object_finalized({"bucket": host.bucket, "name": name, "generation": generation}) == "ignored"
    )
    assert host.deliver(name, generation) == 200
    assert host.store.ops == {}
    assert not host.events
    assert host.log_records() == []


def test_an_event_for_a_lock_or_a_result_changes_nothing_on_a_busy_table(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The events the protocol causes itself (lock rewrites, results, manifests, claims) are many;
    replaying all of them any number of times does nothing."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.put_batch(f"{TABLE}/01")
    host.drain()
    own = [
        (name, generation)
        for name, generation, _ in host.delivered
        if "/_bqlock" in name or "/_turnstile/results/" in name or "_claimed_" in name or "manifest" in name
    ]
    assert own
    host.store.ops.clear()
    for name, generation in own * 2:
        assert host.deliver(name, generation) == 200
    assert host.store.ops == {}
    assert host.applied(TABLE) == ["01"]


def test_a_duplicate_success_event_writes_nothing_and_applies_nothing(host: Host) -> None:
    generation = host.put_batch(f"{TABLE}/2024/05/01/13")
    host.drain()
    assert host.applied(TABLE) == ["2024/05/01/13"]
    host.store.ops.clear()
    assert (
        entry.object_finalized(
            {"bucket": host.bucket, "name": f"{TABLE}/2024/05/01/13/_SUCCESS", "generation": str(generation)}
        )
        == "duplicate"
    )
    # Its job exists under the same deterministic id: reads and listings only, nothing written.
    assert set(host.store.ops) <= {"stat", "read", "list"}
    assert host.applied(TABLE) == ["2024/05/01/13"]


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"bucket": "b"},
        {"bucket": "b", "name": "ds/tbl/01/_SUCCESS"},
        {"bucket": "b", "name": "ds/tbl/01/_SUCCESS", "generation": "not-a-number"},
        {"bucket": "b", "name": None, "generation": None},
        ["not", "an", "object"],
        "just a string",
        42,
    ],
    ids=["empty", "no-name", "no-generation", "bad-generation", "nulls", "list", "string", "number"],
)
def test_a_malformed_payload_is_logged_and_acknowledged(host: Host, data: Any) -> None:
    status = post(host, data)
    assert 200 <= status < 300, "a payload that can never succeed must not be redelivered"
    assert host.store.ops == {}
    [error] = [r for r in host.log_records() if r["severity"] == "ERROR"]
    assert error["event"] == "rejected"
    assert "bucket, name, generation" in error["message"]


def test_a_structured_mode_event_is_handled_like_a_binary_one(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generation = host.put_batch(f"{TABLE}/01")
    host.events.clear()
    event = cloud_event(host.bucket, f"{TABLE}/01/_SUCCESS", generation)
    headers, body = to_structured(event)
    assert host.client.post("/", headers=headers, data=body).status_code == 200
    assert host.backlog(TABLE) == ["01"]
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]


@pytest.mark.parametrize(
    "name",
    [
        "_SUCCESS",  # at the bucket root: no table
        "ds/_SUCCESS",  # a dataset but no table
        "ds/tbl-1/01/_SUCCESS",  # a table name that is no identifier
        "ds/tbl/2024/13/01/_SUCCESS",  # an impossible date
        "ds/tbl/a//_SUCCESS",  # an empty segment
        "_BACKFILL",  # state objects outside a table folder
        "ds/_BACKFILL",
        "ds/tbl/_backlog/_claimed_x",
    ],
)
def test_an_object_that_maps_to_no_table_is_rejected_not_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, name: str
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generation = host.upload(name)
    host.drain(max_events=50)
    assert all(status < 500 for _, _, status in host.delivered)
    assert host.tables.commits == {}
    for record in host.log_records():
        if record["severity"] == "ERROR":
            assert record["event"] == "rejected"
            assert record["object"] == f"gs://{host.bucket}/{name}"
            assert record["generation"] == generation
    # A redelivery is acknowledged again and writes nothing.
    host.store.ops.clear()
    assert host.deliver(name, generation) == 200
    assert not host.events  # no object written
    assert not {"replace", "write", "delete", "remove"} & set(host.store.ops)
    assert host.tables.commits == {}


ORIGINAL_LOCK = b'{"job_id": "gcf-ingest-ds-t-1", "table": {"tableId": "t"}, "retry_attempt_cnt": null}'


@pytest.mark.parametrize(
    "content",
    [b"bq-job-id-1234", b"{}", b"", ORIGINAL_LOCK, b'{"job_id": "manual-hold-by-ops"}'],
    ids=["text", "empty-object", "empty", "original-loader", "manual"],
)
def test_an_unreadable_lock_is_an_error_that_names_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, content: bytes
) -> None:
    """Something other than turnstile wrote `_bqlock` (the original BigQuery function, a person's
    manual hold): the table stops, whatever JSON it holds; the lock is never taken for FREE."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.upload(f"{TABLE}/_bqlock", content)
    generation = host.put_batch(f"{TABLE}/01")
    host.drain(max_events=100)
    assert all(status < 500 for _, _, status in host.delivered)
    assert host.applied(TABLE) == []
    assert host.backlog(TABLE) == ["01"]  # queued, not lost
    errors = [r for r in host.log_records() if r["severity"] == "ERROR"]
    assert errors and all(f"gs://{host.bucket}/{TABLE}/_bqlock" in json.dumps(r) for r in errors)
    assert host.store.inner.read(f"{TABLE}/_bqlock").data == content  # not overwritten
    if content == ORIGINAL_LOCK:
        assert any("gcs_ocn_bq_ingest's lock (job 'gcf-ingest-ds-t-1')" in json.dumps(r) for r in errors)
    # Replaced by a turnstile lock (here: removed), the table moves again.
    host.store.inner.remove(f"{TABLE}/_bqlock")
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert host.lock(TABLE).state is LockState.FREE


def test_a_bad_setting_is_reported_once_and_never_makes_the_trigger_retry(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """One bad environment variable must not turn every event (data files included) into a 500 that
    Eventarc retries for a day: events are acknowledged and the problem is logged once per instance."""
    entry.report_bad_settings.cache_clear()
    host = start_host(monkeypatch, gcs_store, {"FUNCTION_TIMEOUT_SEC": "nine minutes"})
    statuses = [host.deliver(f"ds/tbl/2024/05/01/0{h}/part-0.csv", 1) for h in range(3)]
    statuses.append(host.deliver("ds/tbl/2024/05/01/03/_SUCCESS", 1))
    assert statuses == [200, 200, 200, 200]
    reported = [r for r in host.log_records() if r.get("event") == "settings_invalid"]
    assert len(reported) == 1
    assert reported[0]["severity"] == "CRITICAL"
    assert "FUNCTION_TIMEOUT_SEC" in reported[0]["message"] and "nine minutes" in reported[0]["message"]


def test_a_runner_that_cannot_be_built_from_the_settings_is_reported_not_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    entry.report_bad_settings.cache_clear()
    host = start_host(monkeypatch, gcs_store, ORDERED)

    def unbuildable(settings: Settings, store: ObjectStore) -> JobRunner:
        raise SettingsError("JOB_MAIN_URI is not set; the Dataproc runner needs the staged PySpark main file")

    monkeypatch.setattr(wiring, "job_runner", unbuildable)
    generation = host.put_batch("ds/tbl/2024/05/01/03")
    assert host.deliver("ds/tbl/2024/05/01/03/_SUCCESS", generation) == 200
    assert host.deliver("ds/tbl/2024/05/01/03/_SUCCESS", generation) == 200
    [reported] = [r for r in host.log_records() if r.get("event") == "settings_invalid"]
    assert "JOB_MAIN_URI" in reported["message"]
