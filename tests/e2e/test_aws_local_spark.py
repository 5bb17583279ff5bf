"""End to end on AWS's shapes: moto S3 -> S3 event notifications -> functions/aws_lambda.py ->
the local runner's spark-submit, which stages the batch from S3 (Spark's S3 connector cannot be
installed here) -> Iceberg, checked in the warehouse."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.aws.lambda_harness import LambdaHost, start_lambda_host
from tests.conftest import AWS_REGION
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.local_spark import spark_conf
from turnstile.state.records import Lock, LockState
from turnstile.store.s3 import S3Store

pytestmark = pytest.mark.spark

LETTERS = (
    "MERGE INTO ${table} t USING batch b ON t.id = b.id "
    "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c) "
    "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (b.id, b.c)"
)
TABLE = "lake/letters"


def _settled(host: LambdaHost, results: int) -> bool:
    found = host.store.inner.read(f"{TABLE}/_bqlock")
    lock = Lock() if found is None else Lock.decode(found.data, TABLE)
    return (
        lock.state is LockState.FREE
        and not host.store.inner.list_objects(f"{TABLE}/_backlog/", limit=1)
        and len(host.store.inner.list_objects(f"{TABLE}/_turnstile/results/")) >= results
    )


@pytest.fixture
def runner(moto_server: str, iceberg_jars: list[Path], warehouse: Path, tmp_path: Path) -> LocalRunner:
    """spark-submit here; the job process finds moto through AWS_ENDPOINT_URL in its environment."""
    environment = {
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_REGION": AWS_REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "ICEBERG_CATALOG": "local",
        "ICEBERG_WAREHOUSE": str(warehouse),
    }
    return LocalRunner(tmp_path / "home", spark_conf(iceberg_jars, warehouse, "local"), environment)


@pytest.fixture
def host(
    s3_store: S3Store, runner: LocalRunner, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> LambdaHost:
    """The Lambda handlers on a moto bucket, jobs under the local runner; the dummy credentials and
    the catalog settings reach the job process through the environment."""
    env = {"ICEBERG_CATALOG": "local", "ICEBERG_WAREHOUSE": str(warehouse)}
    return start_lambda_host(monkeypatch, s3_store, lambda _store: runner, env)


def test_ordered_batches_from_s3_land_in_iceberg_in_order_exactly_once(
    host: LambdaHost, spark: Any, tmp_path: Path
) -> None:
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"table_schema": "id INT, s STRING"}).encode())
    host.upload(f"{TABLE}/_config/transform.sql", LETTERS.encode())
    hours = {"10": "A", "11": "B", "12": "C"}
    for hour in ("12", "10", "11"):  # upstream finishes them out of order (the backfill case)
        host.upload(f"{TABLE}/2024/05/01/{hour}/part-0.csv", f"id,c\n1,{hours[hour]}\n".encode())
    for hour in ("12", "10", "11"):
        host.upload(f"{TABLE}/2024/05/01/{hour}/_SUCCESS")

    deadline = time.monotonic() + 300
    while not _settled(host, 3):
        assert time.monotonic() < deadline, f"not settled; job logs under {tmp_path / 'home' / 'jobs'}"
        host.drain()
        if not host.notice_other_writers():  # the jobs' done signals and results, as S3 would notify
            time.sleep(0.5)

    rows = [tuple(r) for r in spark.sql("SELECT id, s FROM local.lake.letters").collect()]
    rels = [
        r[0]
        for r in spark.sql(
            "SELECT summary['turnstile.rel'] FROM local.lake.letters.snapshots ORDER BY committed_at"
        ).collect()
    ]
    # The MERGE appends each hour's letter: ABC only if every batch ran after its predecessor, once.
    assert rows == [(1, "ABC")]
    assert rels == ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"]
