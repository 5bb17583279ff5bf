"""A moto S3 bucket wired to functions/aws_lambda.py the way S3 event notifications wire them.

Every write (upstream's and the functions' own) becomes an S3 `ObjectCreated:Put` notification in
the exact shape S3 sends (keys URL-encoded, `+` for a space), queued and handed to the real
handler by `drain`, optionally shuffled and duplicated. A raised error is retried, as Lambda
retries a failed asynchronous invocation.
"""

from __future__ import annotations

import importlib.util
import io
import json
import random
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.entrypoints import wiring_aws
from turnstile.jobs.port import JobRunner
from turnstile.state.records import Lock, LockState
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.store.split import SplitStore

ROOT = Path(__file__).resolve().parents[2]


def load_handlers() -> ModuleType:
    """functions/aws_lambda.py as Lambda imports it: a top-level module beside the package."""
    spec = importlib.util.spec_from_file_location("aws_lambda", ROOT / "functions" / "aws_lambda.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def s3_notification(
    bucket: str, key: str, etag: str = "0123", event: str = "ObjectCreated:Put"
) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "eu-west-1",
                "eventTime": "2024-05-01T13:00:00.000Z",
                "eventName": event,
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "turnstile-events",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": {"key": urllib.parse.quote_plus(key, safe="/"), "size": 0, "eTag": etag},
                },
            }
        ]
    }


def eventbridge_event(
    bucket: str, key: str, etag: str = "0123", detail_type: str = "Object Created"
) -> dict[str, Any]:
    """An EventBridge event of S3 as the bucket's "send notifications to EventBridge" sends it."""
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": detail_type,
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2024-05-01T13:00:00Z",
        "region": "eu-west-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": key, "size": 0, "etag": etag, "sequencer": "00617F08299329D189"},
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "reason": "PutObject",
        },
    }


@dataclass
class LambdaHost:
    store: RecordingStore
    handlers: ModuleType
    events: deque[str] = field(default_factory=deque)
    outcomes: list[str] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # name -> the generation last notified
    log: io.StringIO = field(default_factory=io.StringIO)

    @property
    def bucket(self) -> str:
        return self.store.bucket

    def upload(self, name: str, data: bytes = b"") -> int:
        return self.store.write(name, data)

    def put_batch(self, folder: str, rows: int = 1) -> int:
        """Upstream: a data file, then `_SUCCESS` last. Returns the `_SUCCESS` generation."""
        self.upload(f"{folder}/part-0.csv", b"id\n" + b"".join(b"%d\n" % i for i in range(rows)))
        return self.upload(f"{folder}/_SUCCESS")

    def settled(self, table: str, results: int) -> bool:
        """The table's lock free, its backlog empty, and at least `results` result records written."""
        found = self.store.inner.read(f"{table}/_bqlock")
        lock = Lock() if found is None else Lock.decode(found.data, table)
        return (
            lock.state is LockState.FREE
            and not self.store.inner.list_objects(f"{table}/_backlog/", limit=1)
            and len(self.store.inner.list_objects(f"{table}/_turnstile/results/")) >= results
        )

    def notice_other_writers(self) -> int:
        """Queue a notification for every object another process (a Spark job) wrote or rewrote."""
        fresh = [
            info for info in self.store.inner.list_objects("") if self.seen.get(info.name) != info.generation
        ]
        for info in fresh:
            self.seen[info.name] = info.generation
            self.events.append(info.name)
        return len(fresh)

    def drain(
        self, *, rng: random.Random | None = None, duplicates: float = 0.0, max_events: int = 3000
    ) -> int:
        count = 0
        failure: Exception | None = None
        while self.events:
            if count >= max_events:
                raise AssertionError(
                    f"more than {max_events} events: the system does not settle (last failure: {failure!r})"
                )
            if rng is not None:
                self.events.rotate(-rng.randrange(len(self.events)))
            key = self.events.popleft()
            if rng is not None and rng.random() < duplicates:
                self.events.append(key)
            try:
                result = self.handlers.on_s3_event(s3_notification(self.bucket, key), None)
            except Exception as exc:
                failure = exc
                self.events.append(key)  # Lambda retries a failed asynchronous invocation
            else:
                self.outcomes.extend(result["outcomes"])
            count += 1
        return count

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON lines the handlers logged."""
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line.strip()]


def start_lambda_host(
    monkeypatch: pytest.MonkeyPatch,
    store: ObjectStore,
    runner_for: Callable[[ObjectStore], JobRunner],
    env: dict[str, str] | None = None,
    state: ObjectStore | None = None,
) -> LambdaHost:
    """Wire functions/aws_lambda.py to `store` and the runner `runner_for` builds over the
    recording store; settings come from `env`. With `state` (STATE_BUCKET), turnstile's own objects
    go there and notify nothing."""
    for variable in Settings.variables():
        if not variable.startswith("AWS_"):
            monkeypatch.delenv(variable, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    events: deque[str] = deque()
    seen: dict[str, int] = {}

    def notify(name: str, generation: int) -> None:
        seen[name] = generation
        events.append(name)

    recording = RecordingStore(store, notify)
    functions_store: ObjectStore = recording if state is None else SplitStore(recording, state)
    runner = runner_for(functions_store)
    monkeypatch.setattr(wiring_aws, "s3_store", lambda settings, bucket: functions_store)
    monkeypatch.setattr(wiring_aws, "job_runner", lambda settings, store: runner)
    log = io.StringIO()
    logs.configure("INFO", log)
    return LambdaHost(recording, load_handlers(), events, seen=seen, log=log)
