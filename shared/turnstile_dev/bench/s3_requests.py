"""S3 requests per batch: the counting workload through the Lambda handlers on a moto S3 server.

A `RequestCounter` hooks botocore's `before-call` event of each client it is attached to, so it
counts API calls as S3 bills them (one per call; botocore's own retries of a call are not new
calls), whoever makes them: the event handler, the subscriber, the job's bucket side.

`run_workload` plays the counting workload (`turnstile_dev.bench.counting`) the way AWS runs it:
upstream uploads each batch's files and `_SUCCESS` with plain `PutObject` (not counted) to a
versioned data bucket, turnstile keeps its own objects in a state bucket (STATE_BUCKET, as
docs/DEPLOY-AWS.md recommends), each object whose suffix the bucket's notifications select
(`_SUCCESS`, `_BACKFILL`, `.done`, the gate) is an S3 notification handed to
`turnstile.entrypoints.lambda_entry`, and jobs run in process between notifications (`InlineRunner`: the job's
bucket side). `batch_sizes` compares one batch of one file with one batch of many.

`python -m turnstile_dev.bench.s3_requests [--quick]` runs this part of the benchmark alone on a
moto server of its own and prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import threading
import urllib.parse
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from moto.server import ThreadedMotoServer

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.entrypoints import lambda_entry
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import classify
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.store.s3 import S3Store, make_client
from turnstile.store.split import SplitStore
from turnstile_dev.bench.workload import GATE, SCHEMA, SUCCESS, Workload

REGION = "eu-west-1"
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_SESSION_TOKEN": "bench",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


class RequestCounter:
    """S3 API calls by operation, over every client `attach`ed; thread safe."""

    def __init__(self) -> None:
        self._calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        """Count `client`'s calls from now on; returns the client."""
        client.meta.events.register("before-call.s3", self._count)
        return client

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self._calls[str(model.name)] += 1

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._calls)

    def since(self, before: Counter[str]) -> Counter[str]:
        """Calls made since `before` (a `snapshot`), by operation."""
        now = self.snapshot()
        now.subtract(before)
        return Counter({op: n for op, n in now.items() if n})


def notification(bucket: str, key: str) -> dict[str, Any]:
    """An S3 `ObjectCreated:Put` event notification as S3 sends it (the key URL-encoded)."""
    quoted = urllib.parse.quote_plus(key, safe="/")
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": bucket}, "object": {"key": quoted}},
            }
        ]
    }


class LambdaHost:
    """The events Lambda in process over a counted data bucket and state bucket of one endpoint."""

    def __init__(self, endpoint: str, data_bucket: str, state_bucket: str) -> None:
        self.counter = RequestCounter()
        client = self.counter.attach(make_client(REGION, endpoint))
        self.upstream = make_client(REGION, endpoint)  # upstream's own writes: not turnstile's cost
        self.bucket = data_bucket
        self.events: deque[str] = deque()
        data = RecordingStore(S3Store(client, data_bucket), lambda name, _: self._notify(name))
        self.store: ObjectStore = SplitStore(data, S3Store(client, state_bucket))
        self.tables = MemoryTables()
        self.runner = InlineRunner(self.store, self.tables, synchronous=False)
        self.environ = {
            "START_BACKFILL_FILENAME": GATE,
            "STATE_BUCKET": state_bucket,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": endpoint,
            "LOG_LEVEL": "WARNING",
        }
        self.notifications = 0

    def _notify(self, name: str) -> None:
        if classify(name, SUCCESS, GATE).is_action:  # the suffixes the bucket's notifications select
            self.events.append(name)

    def put(self, key: str, body: bytes = b"") -> None:
        """Upstream writes `key`; its notification is queued when the bucket's filters select it."""
        self.upstream.put_object(Bucket=self.bucket, Key=key, Body=body)
        self._notify(key)

    def drain(self) -> None:
        """Deliver every queued notification, and run each submitted job once none is queued."""
        while True:
            if self.events:
                key = self.events.popleft()
                self.notifications += 1
                lambda_entry.s3_notification(
                    notification(self.bucket, key),
                    environ=self.environ,
                    stores=lambda _settings, _bucket: self.store,
                    runners=lambda _settings, _store: self.runner,
                )
                continue
            pending = self.runner.pending()
            if not pending:
                return
            for job in pending:
                self.runner.run(job)

    def configure(self, dataset: str) -> None:
        self.put(f"{dataset}/_config/ORDERME")
        self.put(f"{dataset}/_config/load.json", json.dumps({"schema": SCHEMA}).encode())

    def upload_batch(self, folder: str, files: Sequence[tuple[str, bytes]]) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda f: self.put(f"{folder}/{f[0]}", f[1]), files))
        self.put(f"{folder}/{SUCCESS}")


def run_workload(endpoint: str, workload: Workload, dataset: str) -> dict[str, Any]:
    """The counting workload's sequence on S3: batches uploaded out of order, each notified as it
    arrives while the gate holds the tables, then the gates, then every event and job until the
    tables are drained. Returns the S3 requests per batch, by operation."""
    host = LambdaHost(endpoint, *_buckets(endpoint, dataset))
    host.configure(dataset)
    host.drain()
    before = host.counter.snapshot()
    for table, batch in workload.arrival():
        folder = f"{dataset}/{workload.table(table)}/{workload.rel(batch)}"
        host.upload_batch(
            folder, [(workload.file_name(p), workload.csv(batch, p)) for p in range(workload.files)]
        )
        host.drain()
    for table in range(workload.tables):
        host.put(f"{dataset}/{workload.table(table)}/{GATE}")
    host.drain()
    calls = host.counter.since(before)
    batches = workload.total_batches
    applied = {
        workload.table(t): host.tables.applied_rels(f"{dataset}/{workload.table(t)}")
        for t in range(workload.tables)
    }
    return {
        "batches": batches,
        "jobs": len(host.runner.submitted),
        "notifications_per_batch": round(host.notifications / batches, 3),
        "requests_per_batch": round(sum(calls.values()) / batches, 3),
        "requests_by_operation_per_batch": {op: round(n / batches, 3) for op, n in calls.most_common()},
        "applied_in_order_once": all(rels == workload.rels() for rels in applied.values()),
    }


def batch_sizes(endpoint: str, files: Sequence[int], dataset: str = "sizes") -> dict[str, dict[str, int]]:
    """The S3 requests of one ordered batch of each size in `files`, each the first batch of a
    table of its own (the same config levels above, cached), by operation."""
    host = LambdaHost(endpoint, *_buckets(endpoint, dataset))
    host.environ.pop("START_BACKFILL_FILENAME")
    host.configure(dataset)
    host.upload_batch(f"{dataset}/warm/2024/01/01/00", [("part-00000.csv", b"id\n1\n")])
    host.drain()  # the levels above the tables are cached: each measured batch reads only its own
    found: dict[str, dict[str, int]] = {}  # by the number of files, as JSON keys
    for count in files:
        folder = f"{dataset}/f{count}/2024/01/01/00"
        host.upload_batch(folder, [(f"part-{i:05d}.csv", b"id\n1\n") for i in range(count)])
        before = host.counter.snapshot()
        host.drain()
        found[str(count)] = dict(host.counter.since(before).most_common())
        if host.tables.applied_rels(f"{dataset}/f{count}") != ["2024/01/01/00"]:
            raise RuntimeError(f"the batch of {count} files was not applied once")
    return found


def _buckets(endpoint: str, name: str) -> tuple[str, str]:
    """A versioned data bucket (docs/DEPLOY-AWS.md asks for one) and an unversioned state bucket."""
    client = make_client(REGION, endpoint)
    data, state = f"s3-bench-{name}", f"s3-bench-{name}-state"
    for bucket in (data, state):
        client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    client.put_bucket_versioning(Bucket=data, VersioningConfiguration={"Status": "Enabled"})
    return data, state


@contextmanager
def moto_endpoint() -> Iterator[str]:
    """A moto server on a free loopback port, with dummy credentials in the environment (restored
    after): no request can reach an AWS account."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    saved = {key: os.environ.get(key) for key in [*DUMMY_CREDENTIALS, *Settings.variables()]}
    for key in Settings.variables():
        os.environ.pop(key, None)
    os.environ.update(DUMMY_CREDENTIALS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def measure(workload: Workload, big_batch_files: int) -> dict[str, Any]:
    """The benchmark's S3 part: the workload's requests per batch, and one batch of one file
    against one of `big_batch_files` files."""
    logs.configure("WARNING", sys.stderr)
    with moto_endpoint() as endpoint:
        return {
            "coalesced_state_bucket": run_workload(endpoint, workload, "coalesced"),
            "batch_of_files": batch_sizes(endpoint, [1, big_batch_files]),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile_dev.bench.s3_requests", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="1 table x 3 batches, a big batch of 200 files")
    args = parser.parse_args(argv)
    workload = Workload(tables=1, batches=3, files=1, rows=100) if args.quick else Workload(2, 100, 2, 1000)
    found = measure(workload, 200 if args.quick else 2000)
    print(json.dumps(found | {"measured_apart": datetime.now(UTC).isoformat(timespec="seconds")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
