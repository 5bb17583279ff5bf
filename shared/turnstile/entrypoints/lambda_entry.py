"""What the AWS Lambda handlers call: S3 events and the scheduled sweep.

The same publisher/subscriber logic as the Cloud Function: each created object becomes the
(bucket, name, generation) of a finalized object and goes through `turnstile.entrypoints.entry`.

- Events arrive as direct S3 event notifications (`s3:ObjectCreated:*`, Lambda invoked
  asynchronously; docs/DEPLOY-AWS.md says why) or as EventBridge events of the bucket
  (`detail-type` "Object Created", source `aws.s3`). Notification keys are URL-encoded (`+` for a
  space) and decoded here; EventBridge keys arrive as they are.
- A `_config/` object's event (when its notification or rule is wired, docs/DEPLOY-AWS.md) makes
  this instance forget the cached config of its level, as on Google Cloud.
- An S3 event carries no generation: the handler stats the object once and acts on the generation
  the store reports for what the bucket holds now (`turnstile.store.s3`: in a versioned bucket,
  from the object's version and its place among the key's versions; an event's `sequencer` orders
  only events, and the subscriber and the sweeper must read the same generation without one). An
  object gone by then is left alone: whoever removed it acted on it.
- Terminal problems (an event or record of no shape above, a bad path) are logged as `rejected`
  (ERROR) and acknowledged; transient ones raise, so Lambda retries the invocation. Invalid settings
  are reported once per instance (`settings_invalid`) and events acknowledged, as on Google Cloud.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import PathError, SettingsError
from turnstile.entrypoints import entry, wiring_aws
from turnstile.entrypoints.entry import RunnerFactory, StoreFactory
from turnstile.names.paths import ObjectKind, classify
from turnstile.names.uris import parse_bucket_uri
from turnstile.protocol.handler import Handled

log = logs.get("lambda")

EVENTBRIDGE_CREATED = "Object Created"
"""The `detail-type` of EventBridge's event for a new object (S3 sends it when the bucket's
"send notifications to EventBridge" setting is on)."""


@dataclass(frozen=True)
class CreatedObject:
    """One created object an S3 event names, its key decoded."""

    bucket: str
    key: str
    etag: str | None = None


Found = tuple[list[CreatedObject], list[str]]


def created_objects(event: Mapping[str, Any]) -> Found:
    """The created objects an S3 notification or EventBridge event names, and a description of each
    record (or event) it cannot use.

    Pure. Other events of S3 (removals, S3's `s3:TestEvent` on configuration, EventBridge's
    "Object Deleted") are skipped; an event of any other shape is rejected."""
    if "Records" in event:
        return _notification_records(event["Records"])
    if event.get("source") == "aws.s3" and "detail-type" in event:
        return _eventbridge_event(event)
    if event.get("Event") == "s3:TestEvent":
        return [], []
    return [], [
        "not an S3 event notification (Records) nor an EventBridge event of S3 (source aws.s3, "
        f"detail-type {EVENTBRIDGE_CREATED!r}); point the function at the bucket's notifications or "
        f"at an EventBridge rule on them: {dict(event)!r:.500}"
    ]


def _notification_records(records: object) -> Found:
    if not isinstance(records, list):
        return [], [f"an S3 notification's Records must be a list: {records!r:.500}"]
    found: list[CreatedObject] = []
    rejected: list[str] = []
    for record in records:
        try:
            if record.get("eventSource") != "aws:s3":
                rejected.append(_foreign_record(record))
                continue
            if not str(record["eventName"]).startswith("ObjectCreated:"):
                continue  # S3's removals, restores and replication events
            s3 = record["s3"]
            key = urllib.parse.unquote_plus(str(s3["object"]["key"]))
            found.append(CreatedObject(str(s3["bucket"]["name"]), key, s3["object"].get("eTag")))
        except (KeyError, TypeError, AttributeError):
            rejected.append(
                f"not an S3 object-created record (needs s3.bucket.name, s3.object.key): {record!r:.500}"
            )
    return found, rejected


def _foreign_record(record: Mapping[str, Any]) -> str:
    """Why a record of another source is refused: it is an S3 event wrapped (S3 -> SQS or SNS ->
    Lambda), or no S3 event at all. Unwrapping it would hide a wiring the docs do not support."""
    source = record.get("eventSource") or record.get("EventSource")
    return (
        f"a record of {source or 'no eventSource'}, not an S3 notification (eventSource aws:s3): the "
        "function takes the bucket's S3 event notifications directly (or EventBridge events of S3); "
        "for S3 -> SQS or SNS -> Lambda, point the bucket's notification (or an EventBridge rule) at "
        f"the function instead (docs/DEPLOY-AWS.md): {dict(record)!r:.500}"
    )


def _eventbridge_event(event: Mapping[str, Any]) -> Found:
    if event["detail-type"] != EVENTBRIDGE_CREATED:
        return [], []
    try:
        detail = event["detail"]
        found = CreatedObject(
            str(detail["bucket"]["name"]), str(detail["object"]["key"]), detail["object"].get("etag")
        )
    except (KeyError, TypeError, AttributeError):
        return [], [
            "not an EventBridge Object Created event of S3 (needs detail.bucket.name, "
            f"detail.object.key): {dict(event)!r:.500}"
        ]
    return [found], []


def s3_notification(
    event: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    stores: StoreFactory | None = None,
    runners: RunnerFactory | None = None,
    clock: Clock | None = None,
) -> list[str]:
    """Handle one S3 event (a notification or an EventBridge event); return what was done with each
    rejected record, then with each created object, in order."""
    settings = entry.event_settings(environ)
    created, rejected = created_objects(event)
    for error in rejected:
        log.error(f"rejected: {error}", extra={"event": "rejected", "error": error})
    outcomes: list[str] = [Handled.REJECTED] * len(rejected)
    if settings is None:
        return outcomes + [Handled.MISCONFIGURED] * len(created)
    stores = stores or wiring_aws.s3_store
    runners = runners or wiring_aws.job_runner
    return outcomes + [
        _handle(obj, settings, environ=environ, stores=stores, runners=runners, clock=clock)
        for obj in created
    ]


def _handle(
    obj: CreatedObject,
    settings: Settings,
    *,
    environ: Mapping[str, str] | None,
    stores: StoreFactory,
    runners: RunnerFactory | None,
    clock: Clock | None,
) -> str:
    kind = classify(obj.key, settings.success_filename, settings.start_backfill_filename)
    if not kind.is_action and kind is not ObjectKind.CONFIG:
        return Handled.IGNORED  # data files, claims, the lock, records: no head needed
    # A `_config/` object goes on too: this instance forgets its cached level (`entry`).
    try:
        store = stores(settings, obj.bucket)
    except SettingsError as exc:
        entry.report_bad_settings(str(exc))
        return Handled.MISCONFIGURED
    info = store.stat(obj.key)
    if info is None:
        log.info("object gone before its event was handled", extra={"object": f"s3://{obj.bucket}/{obj.key}"})
        return "gone"
    payload = {"bucket": obj.bucket, "name": obj.key, "generation": info.generation}
    return entry.object_finalized(
        payload, environ=environ, stores=lambda _s, _b: store, runners=runners, clock=clock
    )


def sweep_buckets(event: Mapping[str, Any]) -> list[str]:
    """The buckets of a scheduled sweep's input, `{"buckets": ["BUCKET" or "s3://BUCKET", ...]}`."""
    buckets = event.get("buckets")
    if not isinstance(buckets, list) or not buckets or not all(isinstance(b, str) for b in buckets):
        raise SettingsError(
            'the sweeper\'s scheduled event must be {"buckets": ["BUCKET", ...]}, '
            f"got {dict(event)!r:.300}; fix the input of its EventBridge schedule"
        )
    names = []
    for bucket in buckets:
        if "://" not in bucket:
            names.append(bucket)
            continue
        try:
            where = parse_bucket_uri(bucket)
        except PathError as exc:
            raise SettingsError(f"{exc}; fix the input of the sweeper's EventBridge schedule") from exc
        if where.scheme != "s3" or where.path:
            raise SettingsError(
                f"the sweeper on AWS sweeps S3 buckets: {bucket!r} is not s3://BUCKET; "
                "fix the input of its EventBridge schedule"
            )
        names.append(where.bucket)
    return names


def scheduled_sweep(
    event: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    stores: StoreFactory | None = None,
    runners: RunnerFactory | None = None,
    clock: Clock | None = None,
) -> list[dict[str, Any]]:
    """Run the sweeper over the S3 buckets the schedule names; return what it found and did."""
    return entry.sweep_buckets(
        sweep_buckets(event),
        environ=environ,
        stores=stores or wiring_aws.s3_store,
        runners=runners or wiring_aws.job_runner,
        clock=clock,
    )
