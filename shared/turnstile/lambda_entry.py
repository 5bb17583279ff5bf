"""What the AWS Lambda handlers call: S3 event notifications and the scheduled sweep.

The same publisher/subscriber logic as the Cloud Function: each S3 record becomes the
(bucket, name, generation) of a finalized object and goes through `turnstile.entry`.

- Events arrive as direct S3 event notifications (`s3:ObjectCreated:*`, Lambda invoked
  asynchronously; docs/DEPLOY-AWS.md says why not EventBridge or SQS). Their keys are URL-encoded
  (`+` for a space): decoded here.
- An S3 event carries no generation: the handler reads the object's head once, and acts on the
  generation the store reports for what the bucket holds now (`turnstile.store.s3`). An object
  gone by then is left alone: whoever removed it acted on it.
- Terminal problems (a record that is not an S3 object event, a bad path) are logged and
  acknowledged; transient ones raise, so Lambda retries the invocation.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnstile import entry, logs, wiring_aws
from turnstile.clock import Clock
from turnstile.entry import RunnerFactory, StoreFactory
from turnstile.errors import PathError, SettingsError
from turnstile.paths import classify
from turnstile.settings import Settings
from turnstile.uris import parse_bucket_uri

log = logs.get("lambda")


@dataclass(frozen=True)
class CreatedObject:
    """One `ObjectCreated` record of an S3 event notification, its key decoded."""

    bucket: str
    key: str
    etag: str | None = None


def created_objects(event: Mapping[str, Any]) -> tuple[list[CreatedObject], list[str]]:
    """The created objects an S3 notification names, and a description of each record it cannot use.

    Pure. Records of other events (removals, S3's `s3:TestEvent` on configuration) are skipped."""
    found: list[CreatedObject] = []
    rejected: list[str] = []
    for record in event.get("Records") or []:
        try:
            if record.get("eventSource") != "aws:s3" or not str(record["eventName"]).startswith(
                "ObjectCreated:"
            ):
                continue
            s3 = record["s3"]
            key = urllib.parse.unquote_plus(str(s3["object"]["key"]))
            found.append(CreatedObject(str(s3["bucket"]["name"]), key, s3["object"].get("eTag")))
        except (KeyError, TypeError, AttributeError):
            rejected.append(
                f"not an S3 object-created record (needs s3.bucket.name, s3.object.key): {record!r:.500}"
            )
    return found, rejected


def s3_notification(
    event: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    stores: StoreFactory | None = None,
    runners: RunnerFactory | None = None,
    clock: Clock | None = None,
) -> list[str]:
    """Handle one S3 event notification; return what was done per created object, in order."""
    settings = Settings.from_env(environ)
    logs.configure(settings.log_level)
    created, rejected = created_objects(event)
    for error in rejected:
        log.error(f"rejected: {error}", extra={"event": "rejected", "error": error})
    stores = stores or wiring_aws.s3_store
    runners = runners or wiring_aws.job_runner
    return [
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
    if not classify(obj.key, settings.success_filename, settings.start_backfill_filename).is_action:
        return "ignored"  # data files, claims, the lock, records: no head needed
    store = stores(settings, obj.bucket)
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
