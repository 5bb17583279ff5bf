"""Cloud Function entrypoints (2nd gen). Thin: decode the request, call the library, map errors.

- `on_object_finalized`: CloudEvent `google.cloud.storage.object.v1.finalized` from the bucket.
  Terminal errors are logged and acknowledged inside the library; anything raised here makes the
  function fail so Eventarc redelivers the event (transient errors).
- `sweep`: HTTP, called by Cloud Scheduler with `{"buckets": ["..."]}`. A body that is no such
  object is a 400 saying what is wrong; an error retrying cannot fix (storage refusing access) is a
  500 whose body and ERROR log (`sweep_refused`) name the object and the fix.
"""

from __future__ import annotations

import json

import flask
import functions_framework
from cloudevents.http import CloudEvent

from turnstile.core import logs
from turnstile.core.errors import Terminal, TurnstileError
from turnstile.entrypoints import entry

log = logs.get("sweep")


@functions_framework.cloud_event
def on_object_finalized(event: CloudEvent) -> None:
    entry.object_finalized(event.get_data() or {})


USAGE = 'POST a JSON object {"buckets": ["BUCKET", ...]}'
_JSON_KINDS: dict[type, str] = {
    list: "a JSON array",
    str: "a JSON string",
    bool: "a JSON boolean",
    int: "a JSON number",
    float: "a JSON number",
}


def _bad_request(problem: str) -> flask.Response:
    error = f"{problem}; {USAGE}"
    return flask.Response(json.dumps({"error": error}), 400, mimetype="application/json")


@functions_framework.http
def sweep(request: flask.Request) -> flask.Response:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        # Not JSON, or JSON that is no object (an array, a string): retrying cannot fix it.
        kind = _JSON_KINDS.get(type(body), "not JSON")
        return _bad_request(f"the request body is {kind}, not a JSON object")
    buckets = body.get("buckets")
    if not isinstance(buckets, list) or not buckets or not all(isinstance(b, str) and b for b in buckets):
        return _bad_request(f'"buckets" must be a non-empty list of bucket names, got {buckets!r:.200}')
    try:
        report = entry.sweep_buckets(buckets)
    except TurnstileError as exc:
        if not isinstance(exc, Terminal):
            raise  # transient: a 500, and the next scheduled sweep tries again
        # Retrying cannot help (storage refused access, a bad setting): say what, once, no traceback.
        log.error(f"sweep refused: {exc}", extra={"event": "sweep_refused", "error": str(exc)})
        return flask.Response(json.dumps({"error": str(exc)}), 500, mimetype="application/json")
    return flask.Response(json.dumps({"tables": report}), 200, mimetype="application/json")
