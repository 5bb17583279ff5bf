"""S3 requests per batch through the Lambda handlers on a moto server, counted per API call: a
batch's data files are listed, never HEADed one by one, so a batch of 2,000 files costs the HEADs of
a batch of one (and two more listing pages)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.aws.lambda_harness import LambdaHost, s3_notification, start_lambda_host
from tests.aws.upstream import upstream_put
from tests.conftest import AWS_REGION
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.state.records import BatchResult
from turnstile.store.s3 import S3Store, make_client
from turnstile_dev.bench import report, s3_requests
from turnstile_dev.bench.s3_requests import RequestCounter
from turnstile_dev.bench.workload import Workload

ORDERED = {"ORDER_PER_TABLE": "true"}


def upload_batch(client: Any, bucket: str, folder: str, files: int) -> str:
    """Upstream: `files` data files, then `_SUCCESS`; returns its name."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(
            pool.map(
                lambda i: upstream_put(client, bucket, f"{folder}/part-{i:05d}.csv", b"id\n1\n"), range(files)
            )
        )
    upstream_put(client, bucket, f"{folder}/_SUCCESS")
    return f"{folder}/_SUCCESS"


def applied(host: LambdaHost, counter: RequestCounter, success: str) -> Counter[str]:
    """The S3 requests turnstile makes for one batch: its `_SUCCESS` notification and everything it
    leads to (the subscriber, the job's bucket side, the job's end)."""
    before = counter.snapshot()
    host.handlers.on_s3_event(s3_notification(host.bucket, success), None)
    host.drain()
    return counter.since(before)


def test_a_batch_of_2000_files_costs_the_heads_of_a_batch_of_one(
    monkeypatch: pytest.MonkeyPatch, moto_server: str, s3_bucket: str
) -> None:
    tables = MemoryTables()
    counter = RequestCounter()
    store = S3Store(counter.attach(make_client(AWS_REGION, moto_server)), s3_bucket)
    host = start_lambda_host(monkeypatch, store, lambda s: InlineRunner(s, tables), ORDERED)
    upstream = make_client(AWS_REGION, moto_server)  # not counted: upstream's own writes
    small = upload_batch(upstream, s3_bucket, "sales/small/2024/05/01/13", 1)
    big = upload_batch(upstream, s3_bucket, "sales/big/2024/05/01/13", 2000)
    for_small = applied(host, counter, small)
    for_big = applied(host, counter, big)
    assert tables.applied_rels("sales/small") == tables.applied_rels("sales/big") == ["2024/05/01/13"]
    [result] = store.list_objects("sales/big/_turnstile/results/")
    found = store.read(result.name)
    assert found is not None and BatchResult.decode(found.data, result.name).rows_read == 2000  # every file
    # HEADs: the notified `_SUCCESS`, the covered one, the conditional writes' ETags: none per file.
    assert for_big["HeadObject"] == for_small["HeadObject"] < 20, (for_small, for_big)
    assert for_big["ListObjectVersions"] == for_small["ListObjectVersions"] == 2  # each `_SUCCESS` stat
    # Only the listing of the big batch's folder grows: 1,000 keys a page.
    assert sum(for_big.values()) <= sum(for_small.values()) + 2, (for_small, for_big)


def test_the_benchmarks_s3_part_counts_requests_per_batch_and_reports_them(moto_server: str) -> None:
    run = s3_requests.run_workload(moto_server, Workload(tables=1, batches=3, files=2, rows=5), "smoke")
    sizes = s3_requests.batch_sizes(moto_server, [1, 30], dataset="smokesizes")
    assert run["applied_in_order_once"] and run["batches"] == 3
    by_operation = run["requests_by_operation_per_batch"]
    assert run["requests_per_batch"] == pytest.approx(sum(by_operation.values()), abs=0.01)
    assert {"HeadObject", "ListObjectsV2", "PutObject", "GetObject"} <= set(by_operation)
    assert sizes["1"]["HeadObject"] == sizes["30"]["HeadObject"]  # none per data file
    section = report._s3({"s3": {"coalesced_state_bucket": run, "batch_of_files": sizes}})
    assert f"**{run['requests_per_batch']:g}** requests per batch" in section
    assert "| `HeadObject` |" in section and "30 file(s)" in section
