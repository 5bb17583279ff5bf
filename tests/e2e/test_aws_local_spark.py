"""End to end on AWS's shapes: moto S3 -> S3 event notifications -> functions/aws_lambda.py ->
the local runner's spark-submit, which stages the batch from S3 (Spark's S3 connector cannot be
installed here) -> Iceberg, checked in the warehouse. Twice: through the local runner's folder-fed
driver, and through production's path (LOCAL_DRIVER=spool): the job a request in the S3 bucket's
spool, served by the warm driver main file run with `--store s3`, as an EMR job run runs it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.aws.lambda_harness import LambdaHost, start_lambda_host
from tests.conftest import AWS_REGION
from turnstile.config.settings import Settings
from turnstile.jobs.local import DRIVERS, LocalRunner, stop_drivers
from turnstile.jobs.local_spark import spark_conf
from turnstile.jobs.local_spool import local_spool_runner
from turnstile.jobs.port import JobRunner
from turnstile.names import driverspool
from turnstile.state.spoolrecords import DriverRecord, JobFinished, Outcome
from turnstile.store.port import ObjectStore
from turnstile.store.s3 import S3Store

pytestmark = pytest.mark.spark

LETTERS = (
    "MERGE INTO ${table} t USING batch b ON t.id = b.id "
    "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c) "
    "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (b.id, b.c)"
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


@pytest.fixture(params=["folder", "spool"])
def path(request: pytest.FixtureRequest) -> str:
    """The local runner's folder-fed driver, or production's path through the bucket's spool."""
    return str(request.param)


@pytest.fixture
def host(
    path: str,
    s3_store: S3Store,
    runner: LocalRunner,
    warehouse: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[LambdaHost]:
    """The Lambda handlers on a moto bucket, jobs under the local runner (its folder-fed driver, or
    the warm runner on the bucket's spool); the dummy credentials and the catalog settings reach
    the job process through the environment."""
    env = {"ICEBERG_CATALOG": "local", "ICEBERG_WAREHOUSE": str(warehouse), "DRIVER_POLL_SECONDS": "0.2"}

    def runner_for(store: ObjectStore) -> JobRunner:
        if path == "folder":
            return runner
        return local_spool_runner(Settings.from_env(), store, runner, cloud="s3")

    yield start_lambda_host(monkeypatch, s3_store, runner_for, env)
    stop_drivers(runner.home)


def test_ordered_batches_from_s3_land_in_iceberg_in_order_exactly_once(  # noqa: PLR0917 - fixtures
    host: LambdaHost, path: str, runner: LocalRunner, s3_store: S3Store, spark: Any, tmp_path: Path
) -> None:
    table = f"lake/letters_{path}"  # the warehouse outlives a test: a table of its own per path
    host.upload(f"{table}/_config/ORDERME")
    host.upload(f"{table}/_config/load.json", json.dumps({"table_schema": "id INT, s STRING"}).encode())
    host.upload(f"{table}/_config/transform.sql", LETTERS.encode())
    hours = {"10": "A", "11": "B", "12": "C"}
    for hour in ("12", "10", "11"):  # upstream finishes them out of order (the backfill case)
        host.upload(f"{table}/2024/05/01/{hour}/part-0.csv", f"id,c\n1,{hours[hour]}\n".encode())
    for hour in ("12", "10", "11"):
        host.upload(f"{table}/2024/05/01/{hour}/_SUCCESS")

    deadline = time.monotonic() + 300
    while not host.settled(table, 3):
        assert time.monotonic() < deadline, f"not settled; job logs under {tmp_path / 'home' / 'jobs'}"
        host.drain()
        if not host.notice_other_writers():  # the jobs' done signals and results, as S3 would notify
            time.sleep(0.5)

    rows = [tuple(r) for r in spark.sql(f"SELECT id, s FROM local.lake.letters_{path}").collect()]
    rels = [
        r[0]
        for r in spark.sql(
            f"SELECT summary['turnstile.rel'] FROM local.lake.letters_{path}.snapshots ORDER BY committed_at"
        ).collect()
    ]
    # The MERGE appends each hour's letter: ABC only if every batch ran after its predecessor, once.
    assert rows == [(1, "ABC")]
    assert rels == ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"]
    submitted = [
        o.name for o in s3_store.list_objects(driverspool.JOBS) if o.name.endswith("/submitted.json")
    ]
    launched = sorted(p.name for p in (runner.home / DRIVERS).glob("*") if p.name != "staged")
    if path == "folder":
        assert submitted == [] and launched == []
        return
    # Production's path: each job (the three batches, coalesced as they queue) submitted to the S3
    # spool and ended SUCCEEDED by a driver launched, whose records count them.
    assert submitted
    ends = [s3_store.read(name.replace("submitted.json", "finished.json")) for name in submitted]
    finished = [JobFinished.decode(end.data, end.name) for end in ends if end is not None]
    assert [end.outcome for end in finished] == [Outcome.SUCCEEDED] * len(submitted)
    assert launched == sorted({end.driver_id for end in finished if end.driver_id})
    records = [s3_store.read(driverspool.driver_name(driver)) for driver in launched]
    served = sum(DriverRecord.decode(r.data, r.name).jobs_served for r in records if r is not None)
    assert served == len(submitted)
