"""The warm driver's main file (DRIVER=warm), a Dataproc Serverless batch or an EMR Serverless job
run: one Spark application that serves the jobs queued in the bucket's spool, of every table, up to
SLOTS side by side.

    driver.py --spool-bucket BUCKET --driver-id ID [--store gcs|s3] [--max-idle-seconds S]
        [--max-lifetime-seconds S] [--poll-seconds S] [--slots SLOTS] [--prices dataproc|emr|laptop]
        [--stage-to DIR]

`turnstile.jobs.warm_runner` starts the application; `turnstile.entrypoints.driver_serve` is its
loop. `--store` names the bucket's cloud: GCS (Dataproc), or S3 (EMR; its client from AWS_REGION and
AWS_ENDPOINT_URL, with the boto3 EMR's runtime carries).
Each job runs as the local warm driver runs one (`turnstile.spark.warm`): in a new session of the
shared Spark context, its output collected per job (and then copied to the driver's output), its
failure line read back as the job's error. `--stage-to` is the local seam (the local stack, the
Dataproc emulator, the tests' EMR player: Spark here reads neither gs:// nor s3://): each job stages
its batch's files into a folder of its own under it. On Dataproc and EMR, Spark reads the bucket.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from turnstile.spark.dependencies import SHIPPED_DIR, use_shipped

if TYPE_CHECKING:
    from turnstile.config.settings import Settings
    from turnstile.state.spoolrecords import Outcome, SpoolRequest
    from turnstile.store.port import ObjectStore

SCHEMES = {"gcs": "gs", "s3": "s3"}
"""`--store`: the URI scheme of the spool's bucket, and of every manifest its requests name."""


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Serve turnstile jobs from the bucket's spool.")
    parser.add_argument("--spool-bucket", required=True, help="the bucket that holds _turnstile/driver/")
    parser.add_argument("--driver-id", required=True, help="this driver's id (its batch or job run name)")
    parser.add_argument("--store", choices=SCHEMES, default="gcs", help="the spool bucket's cloud")
    parser.add_argument("--max-idle-seconds", type=float, default=300.0)
    parser.add_argument("--max-lifetime-seconds", type=float, default=3600.0)
    parser.add_argument("--poll-seconds", type=float, default=2.0)
    parser.add_argument("--slots", type=int, default=4, help="jobs run side by side")
    parser.add_argument(
        "--prices",
        choices=("dataproc", "emr", "laptop"),
        default="dataproc",
        help="the stay-up policy's prices: Dataproc's or EMR Serverless's, or a machine's (idle is free)",
    )
    parser.add_argument("--stage-to", type=Path, help="copy batch files here before reading (emulator)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    spark = SparkSession.builder.appName(f"turnstile-driver-{args.driver_id}").getOrCreate()
    try:
        # Before anything imports pydantic or a storage client: the shipped versions must win.
        use_shipped([Path.cwd() / SHIPPED_DIR, Path(SparkFiles.getRootDirectory()) / SHIPPED_DIR])
        return serve(spark, args)
    finally:
        spark.stop()


def serve(spark: SparkSession, args: argparse.Namespace) -> int:
    from turnstile.config.settings import Settings  # noqa: PLC0415 - after the dependencies
    from turnstile.core.clock import SystemClock  # noqa: PLC0415
    from turnstile.entrypoints.driver_serve import serve_driver  # noqa: PLC0415
    from turnstile.jobs.driver_policy import PRICES  # noqa: PLC0415

    store = spool_store(Settings.from_env(), args.store, args.spool_bucket)
    logs = Path(tempfile.mkdtemp(prefix="turnstile-jobs-"))
    scheme = SCHEMES[args.store]

    def run(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        return run_request(spark, request, args.stage_to, logs, stop_requested, scheme=scheme)

    costs = PRICES[args.prices](args.max_idle_seconds, args.max_lifetime_seconds)
    reason = serve_driver(
        store, SystemClock(), args.driver_id, run, costs, poll_seconds=args.poll_seconds, slots=args.slots
    )
    print(f"turnstile driver {args.driver_id} left: {reason}", flush=True)
    return 0


def spool_store(settings: Settings, store: str, bucket: str) -> ObjectStore:
    """The spool's bucket on GCS (or fake-gcs-server) or on S3 (or the endpoint AWS_ENDPOINT_URL names)."""
    if store == "s3":
        from turnstile.store.s3 import S3Store  # noqa: PLC0415
        from turnstile.store.s3 import make_client as s3_client  # noqa: PLC0415

        return S3Store(s3_client(settings.aws_region, settings.aws_endpoint_url), bucket)
    from turnstile.store.emulated import WriteLock  # noqa: PLC0415
    from turnstile.store.gcs import GcsStore, make_client  # noqa: PLC0415

    host = settings.storage_emulator_host
    writes = WriteLock.for_emulator(host) if host else None  # fake-gcs-server: see store.emulated
    return GcsStore(make_client(settings.gcp_project, host), bucket, emulator_writes=writes)


def run_request(
    spark: SparkSession,
    request: SpoolRequest,
    stage_root: Path | None,
    logs: Path,
    stop_requested: Callable[[], bool] = lambda: False,
    *,
    scheme: str = "gs",
) -> tuple[Outcome, str | None]:
    """One job in a new session of the driver's Spark context, as the local warm driver runs it;
    its manifest must be in the spool's cloud (`scheme`)."""
    import traceback  # noqa: PLC0415

    from turnstile.jobs.local_worker import failure_detail  # noqa: PLC0415
    from turnstile.spark.warm import _run_job, _stopped, output_to  # noqa: PLC0415
    from turnstile.state.spoolrecords import Outcome  # noqa: PLC0415

    manifest = request.body.get("manifest")
    if not isinstance(manifest, str) or not manifest.startswith(f"{scheme}://"):
        return Outcome.FAILED, f"request of job {request.job_id} names no {scheme}:// manifest: {manifest!r}"
    log = logs / f"{request.job_id}.log"
    stage_to = None if stage_root is None else stage_root / request.job_id
    with output_to(log):
        print(f"turnstile driver: job {request.job_id} ({request.table})", flush=True)
        try:
            code = _run_job(spark.newSession(), manifest, stage_to, stop_requested)
        except Exception as exc:  # the job's failure, recorded; the driver goes on
            traceback.print_exc()
            print(f"turnstile job failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 1
    sys.stdout.write(log.read_text(errors="replace"))  # the driver's output keeps every job's
    sys.stdout.flush()
    if _stopped(spark):  # every later job would fail: the batch ends, its job is reported transient
        print("turnstile driver: the Spark context stopped; the next job starts a new driver", flush=True)
        raise SystemExit(1)
    return (Outcome.SUCCEEDED, None) if code == 0 else (Outcome.FAILED, failure_detail(log, code))


if __name__ == "__main__":
    sys.exit(main())
