"""AWS Lambda handlers. Thin: hand the event to the library, return what it did.

- `on_s3_event`: S3 event notifications (`s3:ObjectCreated:*`) of the bucket, or EventBridge's
  "Object Created" events of it, invoked asynchronously. Terminal errors are logged and
  acknowledged inside the library; anything raised here fails the invocation so Lambda retries it
  (transient errors), then sends it to the function's on-failure destination.
- `sweep`: invoked by an EventBridge schedule with the input `{"buckets": ["BUCKET", ...]}`.

Deployment: docs/DEPLOY-AWS.md (handler names `aws_lambda.on_s3_event` and `aws_lambda.sweep`).
"""

from __future__ import annotations

from typing import Any

from turnstile.entrypoints import lambda_entry


def on_s3_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"outcomes": lambda_entry.s3_notification(event)}


def sweep(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"tables": lambda_entry.scheduled_sweep(event)}
