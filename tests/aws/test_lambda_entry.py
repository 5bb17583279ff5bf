"""The Lambda handlers on a moto S3 bucket: S3 notifications in, the same protocol as the Cloud
Function out. Jobs run in-process (InlineRunner); tests/e2e/test_aws_local_spark.py runs real Spark."""

from __future__ import annotations

import json
import random

import pytest

from tests.aws.lambda_harness import (
    LambdaHost,
    eventbridge_event,
    load_handlers,
    s3_notification,
    start_lambda_host,
)
from tests.aws.upstream import misordered_pair, same_second, upstream_put, within_one_second
from tests.conftest import AWS_REGION
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import entry, wiring_aws
from turnstile.entrypoints.lambda_entry import created_objects
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import Table
from turnstile.state.records import Lock, LockState, Pointer
from turnstile.store.s3 import S3Store
from turnstile.store.s3 import make_client as make_s3_client

ORDERED = {"ORDER_PER_TABLE": "true"}
BUILT_RUNNER = wiring_aws.job_runner  # before a test wires an in-process runner in its place


@pytest.fixture
def tables() -> MemoryTables:
    return MemoryTables()


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, s3_store: S3Store, tables: MemoryTables) -> LambdaHost:
    return start_lambda_host(monkeypatch, s3_store, lambda store: InlineRunner(store, tables), ORDERED)


# -- the event's shape ----------------------------------------------------------------------------------


def test_keys_are_url_decoded() -> None:
    event = s3_notification("b", "sales/orders/batch one+two%/_SUCCESS")
    assert event["Records"][0]["s3"]["object"]["key"] == "sales/orders/batch+one%2Btwo%25/_SUCCESS"
    [created], rejected = created_objects(event)
    assert (created.bucket, created.key, rejected) == ("b", "sales/orders/batch one+two%/_SUCCESS", [])


def test_removals_and_the_configuration_test_event_are_skipped_and_junk_is_reported() -> None:
    removal = s3_notification("b", "sales/orders/b1/_SUCCESS", event="ObjectRemoved:Delete")
    assert created_objects(removal) == ([], [])
    assert created_objects({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"}) == ([], [])
    found, rejected = created_objects(
        {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put"}]}
    )
    assert found == [] and len(rejected) == 1 and "needs s3.bucket.name, s3.object.key" in rejected[0]


def test_an_eventbridge_object_created_event_names_its_object_as_it_is() -> None:
    # EventBridge does not URL-encode the key: a '+' stays a '+'.
    [created], rejected = created_objects(eventbridge_event("b", "sales/orders/a+b c/_SUCCESS", etag="e1"))
    assert (created.bucket, created.key, created.etag, rejected) == (
        "b",
        "sales/orders/a+b c/_SUCCESS",
        "e1",
        [],
    )
    assert created_objects(
        eventbridge_event("b", "sales/orders/b1/_SUCCESS", detail_type="Object Deleted")
    ) == (
        [],
        [],
    )


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"detail-type": "Object Created", "source": "aws.s3", "detail": {"bucket": {"name": "b"}}},
            "needs detail",
        ),
        ({"Records": "junk"}, "Records must be a list"),
        (
            {"Type": "Notification", "Message": "{}"},
            "not an S3 event notification (Records) nor an EventBridge",
        ),
        ({}, "not an S3 event notification"),
    ],
    ids=["eventbridge-without-object", "records-not-a-list", "sns-envelope", "empty"],
)
def test_an_event_of_another_shape_is_rejected_with_what_it_needs(
    event: dict[str, object], message: str
) -> None:
    found, [rejected] = created_objects(event)
    assert found == [] and message in rejected


def _wrapped(source: str) -> dict[str, object]:
    body = json.dumps(s3_notification("b", "sales/orders/b1/_SUCCESS"))
    if source == "sqs":
        return {"Records": [{"messageId": "1", "eventSource": "aws:sqs", "body": body}]}
    return {"Records": [{"EventSource": "aws:sns", "Sns": {"Type": "Notification", "Message": body}}]}


@pytest.mark.parametrize("source", ["sqs", "sns"])
def test_an_s3_event_wrapped_in_sqs_or_sns_is_rejected_with_the_wiring_to_use(source: str) -> None:
    found, [rejected] = created_objects(_wrapped(source))
    assert found == []
    assert f"a record of aws:{source}, not an S3 notification" in rejected
    assert "point the bucket's notification (or an EventBridge rule) at the function" in rejected


def test_a_wrapped_event_reaches_the_rejected_alarm(host: LambdaHost) -> None:
    assert host.handlers.on_s3_event(_wrapped("sqs"), None) == {"outcomes": ["rejected"]}
    [record] = [r for r in host.log_records() if r.get("event") == "rejected"]
    assert record["severity"] == "ERROR" and "aws:sqs" in record["error"]


# -- the protocol through the handler --------------------------------------------------------------------


def test_eventbridge_events_queue_and_apply_the_batch(host: LambdaHost, tables: MemoryTables) -> None:
    for rel in ("2024/05/01/13", "batch a+b"):
        host.put_batch(f"sales/orders/{rel}")
    host.events.clear()  # the bucket sends its events to EventBridge, not to the function
    outcomes = [
        host.handlers.on_s3_event(eventbridge_event(host.bucket, f"sales/orders/{rel}/_SUCCESS"), None)
        for rel in ("2024/05/01/13", "batch a+b")
    ]
    assert outcomes == [{"outcomes": ["queued"]}, {"outcomes": ["queued"]}]
    host.drain()
    assert tables.applied_rels("sales/orders") == ["2024/05/01/13", "batch a+b"]


def test_an_event_of_another_shape_is_logged_as_rejected_not_dropped(host: LambdaHost) -> None:
    result = host.handlers.on_s3_event({"Type": "Notification", "Message": "{}"}, None)
    assert result == {"outcomes": ["rejected"]}
    [record] = [r for r in host.log_records() if r.get("event") == "rejected"]
    assert record["severity"] == "ERROR"
    assert "not an S3 event notification" in record["error"]


def test_invalid_settings_are_reported_once_and_events_acknowledged(
    host: LambdaHost, monkeypatch: pytest.MonkeyPatch, tables: MemoryTables
) -> None:
    entry.report_bad_settings.cache_clear()
    monkeypatch.setenv("FUNCTION_TIMEOUT_SEC", "nine minutes")
    host.put_batch("sales/orders/2024/05/01/13")
    host.events.clear()
    for name in ("sales/orders/2024/05/01/13/part-0.csv", "sales/orders/2024/05/01/13/_SUCCESS") * 2:
        assert host.handlers.on_s3_event(s3_notification(host.bucket, name), None) == {
            "outcomes": ["misconfigured"]
        }
    [reported] = [r for r in host.log_records() if r.get("event") == "settings_invalid"]
    assert reported["severity"] == "CRITICAL"
    assert "FUNCTION_TIMEOUT_SEC" in reported["message"] and "nine minutes" in reported["message"]
    assert host.store.inner.list_objects("sales/orders/_backlog/") == []  # nothing acted on
    monkeypatch.delenv("FUNCTION_TIMEOUT_SEC")  # the fix is deployed: the sweeper catches up
    host.handlers.sweep({"buckets": [host.bucket]}, None)
    host.drain()
    assert tables.applied_rels("sales/orders") == ["2024/05/01/13"]


def test_a_lambda_left_on_the_local_runner_names_job_runner_in_its_alert(
    host: LambdaHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry.report_bad_settings.cache_clear()
    monkeypatch.setattr(wiring_aws, "job_runner", BUILT_RUNNER)  # what the deployed Lambda builds
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # real S3: no local jobs
    host.put_batch("sales/orders/2024/05/01/13")
    host.drain()
    assert set(host.outcomes) == {"ignored", "misconfigured"}
    [reported] = [r for r in host.log_records() if r.get("event") == "settings_invalid"]
    assert reported["severity"] == "CRITICAL"
    assert "JOB_RUNNER is local (its default)" in reported["message"]
    assert "set JOB_RUNNER=emr" in reported["message"]


def test_a_config_objects_event_makes_the_instance_read_that_level_afresh(
    host: LambdaHost, tables: MemoryTables
) -> None:
    host.upload("sales/orders/_config/load.json", b'{"mode": "append"}')
    host.put_batch("sales/orders/2024/05/01/13")
    host.drain()
    assert tables.applied_rels("sales/orders") == ["2024/05/01/13"]
    assert "sales/orders/" in entry.CONFIG_CACHE.levels(host.bucket)  # read once, kept
    host.upload("sales/orders/_config/load.json", b'{"mode": "append", "max_bad_rows": 3}')
    host.drain()  # the config's own notification
    assert "sales/orders/" not in entry.CONFIG_CACHE.levels(host.bucket)


def test_ordered_batches_are_applied_in_order_from_shuffled_duplicated_notifications(
    host: LambdaHost, tables: MemoryTables
) -> None:
    rels = [f"2024/05/01/{hour:02d}" for hour in range(6)]
    for rel in reversed(rels):  # upstream finishes them out of order
        host.put_batch(f"sales/orders/{rel}")
    host.drain(rng=random.Random(7), duplicates=0.3)
    assert tables.applied_rels("sales/orders") == rels
    assert host.store.inner.list_objects("sales/orders/_backlog/") == []
    assert "ignored" in host.outcomes  # the functions' own writes notify too, and are skipped without a read


def test_a_batch_folder_with_a_space_in_its_name_is_published_under_its_decoded_name(
    host: LambdaHost, tables: MemoryTables
) -> None:
    generation = host.put_batch("sales/orders/batch one")
    host.drain()
    assert tables.applied_rels("sales/orders") == ["batch one"]
    result = host.store.inner.read(
        Table(host.bucket, "sales/orders", "sales", "orders").result("batch one", generation)
    )
    assert result is not None


def test_a_failed_batch_blocks_the_table_with_an_s3_unlock_command(
    host: LambdaHost, tables: MemoryTables
) -> None:
    tables.failing.add("2024/05/01/14")
    for hour in ("13", "14", "15"):
        host.put_batch(f"sales/orders/2024/05/01/{hour}")
    host.drain()
    assert tables.applied_rels("sales/orders") == ["2024/05/01/13"]
    found = host.store.inner.read("sales/orders/_bqlock")
    assert found is not None
    lock = Lock.decode(found.data, "lock")
    assert (lock.state, lock.failed_rel) == (LockState.FAILED, "2024/05/01/14")
    assert lock.unlock_command == f"turnstile unlock s3://{host.bucket}/sales/orders [--skip-head]"


def test_an_object_gone_before_its_event_is_left_alone(host: LambdaHost) -> None:
    host.upload("sales/orders/b1/part-0.csv", b"id\n1\n")
    host.store.inner.write("sales/orders/b1/_SUCCESS", b"")
    host.store.inner.remove("sales/orders/b1/_SUCCESS")
    result = host.handlers.on_s3_event(s3_notification(host.bucket, "sales/orders/b1/_SUCCESS"), None)
    assert result == {"outcomes": ["gone"]}
    assert host.store.inner.list_objects("sales/orders/_backlog/") == []


def test_an_upstream_success_gets_the_generation_the_store_reports(host: LambdaHost) -> None:
    # A pointer records the `_SUCCESS` generation: it must be the one S3Store reads back.
    host.put_batch("sales/orders/2024/05/01/13")
    success = host.store.inner.stat("sales/orders/2024/05/01/13/_SUCCESS")
    host.events.clear()
    host.handlers.on_s3_event(s3_notification(host.bucket, "sales/orders/2024/05/01/13/_SUCCESS"), None)
    found = host.store.inner.read("sales/orders/_backlog/2024/05/01/13/_SUCCESS")
    assert success is not None and found is not None
    assert Pointer.decode(found.data, "pointer").success_generation == success.generation


def test_an_identical_success_uploaded_again_within_one_second_is_applied_again(
    monkeypatch: pytest.MonkeyPatch, s3_store: S3Store, tables: MemoryTables, moto_server: str
) -> None:
    # An unordered table applies every `_SUCCESS` generation: upstream re-uploading an empty `_SUCCESS`
    # (the same ETag) within the second of the first asks for the batch once more.
    host = start_lambda_host(monkeypatch, s3_store, lambda store: InlineRunner(store, tables), {})
    client = make_s3_client(AWS_REGION, moto_server)

    def attempt(i: int) -> tuple[str, list[str], list[str]]:
        folder = f"sales/orders/b{i}"
        upstream_put(client, host.bucket, f"{folder}/part-0.csv", b"id\n1\n")
        upstream_put(client, host.bucket, f"{folder}/_SUCCESS")
        first = host.handlers.on_s3_event(s3_notification(host.bucket, f"{folder}/_SUCCESS"), None)
        upstream_put(client, host.bucket, f"{folder}/_SUCCESS")
        again = host.handlers.on_s3_event(s3_notification(host.bucket, f"{folder}/_SUCCESS"), None)
        return folder, first["outcomes"], again["outcomes"]

    folder, first, again = within_one_second(
        attempt, lambda r: same_second(client, host.bucket, f"{r[0]}/_SUCCESS", 2)
    )
    host.drain()
    assert (first, again) == (["submitted"], ["submitted"])
    rel = folder.removeprefix("sales/orders/")
    assert tables.applied_rels("sales/orders").count(rel) == 2


def test_a_success_rewritten_within_one_second_is_queued_at_its_new_generation(
    monkeypatch: pytest.MonkeyPatch, s3_store: S3Store, tables: MemoryTables, moto_server: str
) -> None:
    # The gate holds the table: the pointer must follow the rewrite, as on GCS, not stay at the first.
    env = {**ORDERED, "START_BACKFILL_FILENAME": "_HISTORYDONE"}
    host = start_lambda_host(monkeypatch, s3_store, lambda store: InlineRunner(store, tables), env)
    client = make_s3_client(AWS_REGION, moto_server)
    earlier, later = misordered_pair()

    def attempt(i: int) -> str:
        folder = f"sales/orders/2024/05/01/{i:02d}"
        upstream_put(client, host.bucket, f"{folder}/part-0.csv", b"id\n1\n")
        for body in (earlier, later):
            upstream_put(client, host.bucket, f"{folder}/_SUCCESS", body)
            outcome = host.handlers.on_s3_event(s3_notification(host.bucket, f"{folder}/_SUCCESS"), None)
            assert outcome == {"outcomes": ["queued"]}
        return folder

    folder = within_one_second(attempt, lambda f: same_second(client, host.bucket, f"{f}/_SUCCESS", 2))
    rel = folder.removeprefix("sales/orders/")
    live = s3_store.stat(f"{folder}/_SUCCESS")
    pointer = s3_store.read(f"sales/orders/_backlog/{rel}/_SUCCESS")
    assert live is not None and pointer is not None
    assert Pointer.decode(pointer.data, "pointer").success_generation == live.generation
    upstream_put(client, host.bucket, "sales/orders/_HISTORYDONE")
    host.handlers.on_s3_event(s3_notification(host.bucket, "sales/orders/_HISTORYDONE"), None)
    host.drain()
    assert (rel, live.generation) in tables.commits["sales/orders"]


# -- the scheduled sweep ----------------------------------------------------------------------------------


def test_the_scheduled_sweep_wakes_a_table_whose_backlog_nobody_drains(host: LambdaHost) -> None:
    host.put_batch("sales/orders/2024/05/01/13")
    host.events.clear()  # the notification is lost
    host.handlers.on_s3_event(s3_notification(host.bucket, "sales/orders/2024/05/01/13/_SUCCESS"), None)
    host.store.inner.remove("sales/orders/_BACKFILL")  # ...and so is the run it started
    host.events.clear()
    report = host.handlers.sweep({"buckets": [f"s3://{host.bucket}"]}, None)
    assert [(t["table"], t["verdict"]) for t in report["tables"]] == [
        (f"s3://{host.bucket}/sales/orders", "wake")
    ]
    assert host.store.inner.stat("sales/orders/_BACKFILL") is not None


def test_the_sweep_heads_the_success_objects_of_a_pending_range_not_its_data_files(
    monkeypatch: pytest.MonkeyPatch, moto_server: str, s3_bucket: str, tables: MemoryTables
) -> None:
    client = make_s3_client(AWS_REGION, moto_server)
    heads: list[str] = []
    client.meta.events.register(
        "before-parameter-build.s3.HeadObject", lambda params, **_: heads.append(params["Key"])
    )
    host = start_lambda_host(
        monkeypatch, S3Store(client, s3_bucket), lambda store: InlineRunner(store, tables), ORDERED
    )
    rels = [f"2024/05/01/{hour:02d}" for hour in range(3)]
    for rel in rels:
        for part in range(1, 5):
            host.upload(f"sales/orders/{rel}/part-{part}.csv", b"id\n1\n")
        host.put_batch(f"sales/orders/{rel}")
    host.events.clear()  # every notification is lost
    heads.clear()
    host.handlers.sweep({"buckets": [host.bucket]}, None)
    assert [key for key in heads if "/part-" in key] == []
    assert {f"sales/orders/{rel}/_SUCCESS" for rel in rels} <= set(heads)
    host.drain()  # what the sweep published is applied as usual
    assert tables.applied_rels("sales/orders") == rels


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({}, 'must be {"buckets": ["BUCKET", ...]}'),
        ({"buckets": "lake"}, 'must be {"buckets": ["BUCKET", ...]}'),
        ({"buckets": ["gs://lake"]}, "sweeps S3 buckets: 'gs://lake' is not s3://BUCKET"),
        ({"buckets": ["s3://lake/sales"]}, "is not s3://BUCKET"),
        ({"buckets": ["az://lake"]}, "az:// is not supported; use gs://BUCKET or s3://BUCKET"),
    ],
)
def test_a_bad_schedule_input_says_what_to_fix(event: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_handlers().sweep(event, None)
    assert message in str(caught.value)
