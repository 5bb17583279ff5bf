"""DRIVER=warm on EMR Serverless end to end: moto S3 -> S3 event notifications ->
functions/aws_lambda.py -> the runner wiring_aws builds (WarmRunner on EmrRunner) -> a request in
the S3 bucket's spool and one StartJobRun of the driver main file staged in S3 -> the run played on
this machine (tests/aws/emr_player.py: moto runs no job) -> the driver serves the jobs from the
spool -> Iceberg, checked in the warehouse, the spool and the run's state."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.aws.emr_player import EmrPlayer
from tests.aws.lambda_harness import LambdaHost, start_lambda_host
from tests.aws.moto_emr import create_application, service_runs
from tests.aws.test_emr_runner import env
from tests.conftest import AWS_REGION, create_s3_bucket
from turnstile.config.settings import Settings
from turnstile.deploy import packaging
from turnstile.entrypoints import wiring_aws
from turnstile.jobs.local import LocalRunner, stop_drivers
from turnstile.jobs.local_spark import spark_conf
from turnstile.jobs.port import JobRunner
from turnstile.jobs.warm_runner import DRIVER_LABEL, WarmRunner
from turnstile.names import driverspool
from turnstile.state.spoolrecords import DriverRecord, JobFinished, Outcome
from turnstile.store.port import ObjectStore
from turnstile.store.s3 import S3Store, make_client

pytestmark = pytest.mark.spark

JOB_RUNNER = wiring_aws.job_runner  # before start_lambda_host replaces it with the runner it builds
TABLE = "emr/letters"
LETTERS = (
    "MERGE INTO ${table} t USING batch b ON t.id = b.id "
    "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c) "
    "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (b.id, b.c)"
)


@pytest.fixture
def emr(  # noqa: PLR0917 - fixtures
    moto_server: str,
    s3_store: S3Store,
    iceberg_jars: list[Path],
    warehouse: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[LambdaHost, EmrPlayer]]:
    """The Lambda handlers with DRIVER=warm on an EMR application, the driver main file staged in
    an artifacts bucket, and a player that runs the application's job runs here."""
    artifacts = create_s3_bucket(moto_server, versioned=False)
    client = make_client(AWS_REGION, moto_server)
    client.put_object(Bucket=artifacts, Key="turnstile/driver.py", Body=packaging.DRIVER_MAIN.read_bytes())
    application = create_application(moto_server)
    settings = env(
        application,
        DRIVER="warm",
        DRIVER_MAIN_URI=f"s3://{artifacts}/turnstile/driver.py",
        DRIVER_POLL_SECONDS="0.2",
        ICEBERG_CATALOG="lake",
        AWS_ENDPOINT_URL=moto_server,
    )
    # The run's application: local Spark with a Hadoop catalog named as the deployment's.
    local = LocalRunner(
        tmp_path / "home",
        spark_conf(iceberg_jars, warehouse, "lake"),
        {"ICEBERG_CATALOG": "lake", "ICEBERG_WAREHOUSE": str(warehouse), "AWS_ENDPOINT_URL": moto_server},
    )
    player = EmrPlayer(application, client, local)

    def runner_for(store: ObjectStore) -> JobRunner:
        runner = JOB_RUNNER(Settings.from_env(), store)
        assert isinstance(runner, WarmRunner)
        return runner

    yield start_lambda_host(monkeypatch, s3_store, runner_for, settings), player
    stop_drivers(local.home)


def test_ordered_batches_go_through_the_s3_spool_to_one_emr_driver_run(
    emr: tuple[LambdaHost, EmrPlayer], s3_store: S3Store, spark: Any, tmp_path: Path
) -> None:
    host, player = emr
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"table_schema": "id INT, s STRING"}).encode())
    host.upload(f"{TABLE}/_config/transform.sql", LETTERS.encode())
    hours = {"10": "A", "11": "B", "12": "C"}
    for hour in ("12", "10", "11"):
        host.upload(f"{TABLE}/2024/05/01/{hour}/part-0.csv", f"id,c\n1,{hours[hour]}\n".encode())
    for hour in ("12", "10", "11"):
        host.upload(f"{TABLE}/2024/05/01/{hour}/_SUCCESS")

    deadline = time.monotonic() + 300
    while not host.settled(TABLE, 3):
        assert time.monotonic() < deadline, f"not settled; runs' logs under {tmp_path / 'home' / 'drivers'}"
        host.drain()
        player.step()
        if not host.notice_other_writers():
            time.sleep(0.5)

    rows = [tuple(r) for r in spark.sql("SELECT id, s FROM local.emr.letters").collect()]
    assert rows == [(1, "ABC")]  # each hour's letter once, in order
    # One EMR job run, the driver's, served every job through the spool.
    runs = service_runs(player.application_id)
    assert [run.tags[DRIVER_LABEL] for run in runs] == ["true"]
    [driver_id] = player.launched()
    jobs = s3_store.list_objects(driverspool.JOBS)
    submitted = [o.name for o in jobs if o.name.endswith("/submitted.json")]
    ends = [s3_store.read(name.replace("submitted.json", "finished.json")) for name in submitted]
    finished = [JobFinished.decode(end.data, end.name) for end in ends if end is not None]
    assert submitted and [(e.outcome, e.driver_id) for e in finished] == [
        (Outcome.SUCCEEDED, driver_id)
    ] * len(submitted)
    found = s3_store.read(driverspool.driver_name(driver_id))
    assert found is not None and DriverRecord.decode(found.data, found.name).jobs_served == len(submitted)
