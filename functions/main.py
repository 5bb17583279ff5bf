"""Cloud Function entrypoints (2nd gen). Thin: decode the request, call the library, map errors.

- `on_object_finalized`: CloudEvent `google.cloud.storage.object.v1.finalized` from the bucket.
  Terminal errors are logged and acknowledged inside the library; anything raised here makes the
  function fail so Eventarc redelivers the event (transient errors).
- `sweep`: HTTP, called by Cloud Scheduler with `{"buckets": ["..."]}`.
"""

from __future__ import annotations

import json

import flask
import functions_framework
from cloudevents.http import CloudEvent

from turnstile import entry


@functions_framework.cloud_event
def on_object_finalized(event: CloudEvent) -> None:
    entry.object_finalized(event.get_data() or {})


@functions_framework.http
def sweep(request: flask.Request) -> flask.Response:
    body = request.get_json(silent=True) or {}
    buckets = body.get("buckets") or []
    if not isinstance(buckets, list) or not all(isinstance(b, str) for b in buckets) or not buckets:
        return flask.Response(
            '{"error": "POST {\\"buckets\\": [\\"BUCKET\\", ...]}"}', 400, mimetype="application/json"
        )
    report = entry.sweep_buckets(buckets)
    return flask.Response(json.dumps({"tables": report}), 200, mimetype="application/json")
