"""What a rebuild of a derived step costs beside the step's first build (`rebuild_cost`).

In one warm Spark session, a source table of hourly readings (`rows` per hour, partitioned by hour)
and a derived table in mode `replace_window` over it (one step per hour: readings and total per
sensor). Hour by hour: the job (`execution.execute` with `IcebergApplier`, as `job_cost`) builds the
step; the source's hour then changes (an UPDATE of its rows, not timed); the job rebuilds the step,
as the protocol's rebuild request reaches it (a reprocess of the step with its cause): the window's
rows deleted and the transform's result added in one Iceberg commit. The same transform over the
same window both times: what a rebuild adds is the window's delete. Seconds per step, median, and
their ratio; the first hour is a warm-up, not counted.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from turnstile.config.load_config import LoadConfig
from turnstile.core.clock import SystemClock
from turnstile.spark.applier import IcebergApplier
from turnstile.state.execution import execute
from turnstile.state.records import BatchOutcome, Manifest, ManifestBatch, RebuildCause
from turnstile.store.memory import MemoryStore
from turnstile_dev.bench.job_cost import _LocalFiles
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup, submit

SOURCE = "rebuild_src"
DERIVED = "rebuild_mart"
START = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(hours=1)
SENSORS = 20
LOAD = {
    "derived": {"step": "1h", "start": START.isoformat()},
    "depends_on": [f"{SOURCE}.readings"],
    "mode": "replace_window",
    "time_column": "ts",
    "partition_by": ["hours(ts)"],
}
TRANSFORM = f"""SELECT date_trunc('HOUR', ts) AS ts, sensor, count(*) AS readings, sum(v) AS total
FROM ${{catalog}}.{SOURCE}.readings WHERE ts >= ${{window_start}} AND ts < ${{window_end}}
GROUP BY date_trunc('HOUR', ts), sensor"""


def run(setup: SparkSetup, catalog: str, *, steps: int, rows: int, work: Path) -> SparkRun:
    """`rebuild_cost` alone in its own Spark application: `steps` hours measured (after a warm-up)."""
    step = {"task": "rebuild_cost", "catalog": catalog, "steps": steps, "rows": rows}
    return submit(setup, "rebuild-cost", [step], work / "spark")


def step_batch(catalog_table: str, hour: int, *, rebuild: RebuildCause | None = None) -> ManifestBatch:
    """Step `hour` of the derived table as its job gets it: a first build, or (`rebuild`) the
    rebuild request's reprocess of it."""
    start = START + hour * STEP
    rel = f"{start:%Y/%m/%d/%H}"
    prefix = f"{DERIVED}/{catalog_table}"
    request = f"{start:%Y%m%dT%H%M%S%fZ}-rebuild-{hour:016x}" if rebuild else None
    name = f"1.reprocess-{request}" if request else "1"
    return ManifestBatch(
        dataset=DERIVED,
        table=catalog_table,
        table_prefix=prefix,
        rel=rel,
        success_generation=1,
        data_uris=(),
        load=LoadConfig.model_validate(LOAD),
        transform_sql=TRANSFORM,
        config_digest="bench",
        result=f"{prefix}/_turnstile/results/{rel}/{name}.json",
        failed_prefix=f"{prefix}/_failed/{rel}/",
        reprocess=request,
        rebuild=rebuild,
        window_start=start,
        window_end=start + STEP,
    )


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    """Build, change, rebuild, hour by hour; `step`: {"catalog", "steps", "rows"}."""
    catalog: str = step["catalog"]
    hours, rows = int(step["steps"]) + 1, int(step["rows"])
    source = f"{catalog}.{SOURCE}.readings"
    for namespace in (SOURCE, DERIVED):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
    spark.sql(f"DROP TABLE IF EXISTS {source}")
    spark.sql(
        f"CREATE TABLE {source} (ts TIMESTAMP, sensor STRING, v DOUBLE) USING iceberg "
        "PARTITIONED BY (hours(ts))"
    )
    spark.sql(
        f"INSERT INTO {source} SELECT timestamp_seconds({int(START.timestamp())} + id * 3600 DIV {rows}) "
        f"AS ts, concat('s', CAST(id % {SENSORS} AS STRING)) AS sensor, CAST(id % 97 AS DOUBLE) AS v "
        f"FROM range({hours * rows})"
    )
    store = MemoryStore("bench")
    applier = IcebergApplier(spark, catalog, _LocalFiles(), lambda bucket: store, "bench")
    built: list[float] = []
    rebuilt: list[float] = []
    for hour in range(hours):
        first = _job(store, applier, step_batch("t0", hour), f"build-{hour}")
        start = START + hour * STEP
        spark.sql(  # the source's hour changes after the step read it
            f"UPDATE {source} SET v = v + 1 WHERE ts >= TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}' "
            f"AND ts < TIMESTAMP '{start + STEP:%Y-%m-%d %H:%M:%S}'"
        )
        cause = RebuildCause(
            table=f"{SOURCE}/readings", rel=f"{start:%Y/%m/%d/%H}", success_generation=2, at=start
        )
        again = _job(store, applier, step_batch("t0", hour, rebuild=cause), f"rebuild-{hour}")
        if hour:  # hour 0 warms both paths up
            built.append(first)
            rebuilt.append(again)
    derived = f"{catalog}.{DERIVED}.t0"
    expected = spark.sql(
        f"SELECT date_trunc('HOUR', ts), sensor, count(*), sum(v) FROM {source} GROUP BY 1, 2"
    ).collect()
    held = spark.sql(f"SELECT ts, sensor, readings, total FROM {derived}").collect()
    return {
        "rebuild_cost": summary(
            built, rebuilt, rows, equal=sorted(map(tuple, expected)) == sorted(map(tuple, held))
        )
    }


def _job(store: MemoryStore, applier: IcebergApplier, batch: ManifestBatch, job_id: str) -> float:
    manifest = Manifest(
        job_id=job_id,
        bucket="bench",
        batches=(batch,),
        done_signal=f"{batch.table_prefix}/_turnstile/jobs/{job_id}.done",
        ordered=True,
    )
    started = time.perf_counter()
    done = execute(store, manifest, applier, SystemClock())
    seconds = time.perf_counter() - started
    wanted = BatchOutcome.REBUILT if batch.rebuild else BatchOutcome.COMMITTED
    if not done.succeeded or list(done.outcomes.values()) != [wanted]:
        raise RuntimeError(f"{job_id}: {done.error or done.outcomes}")
    return seconds


def summary(built: list[float], rebuilt: list[float], rows: int, *, equal: bool) -> dict[str, Any]:
    built_median, rebuilt_median = statistics.median(built), statistics.median(rebuilt)
    return {
        "steps": len(built),
        "source_rows_per_step": rows,
        "mode": LOAD["mode"],
        "build_seconds": built,
        "rebuild_seconds": rebuilt,
        "build_median_seconds": built_median,
        "rebuild_median_seconds": rebuilt_median,
        "ratio": rebuilt_median / built_median,
        "equal_to_transform_over_final_source": equal,
    }


def markdown(r: dict[str, Any]) -> str:
    """results.md's section."""
    c = r.get("rebuild_cost")
    if not c:
        return "Not measured in this run.\n"
    when = f"Measured in a separate run on {c['measured_at']}. " if "measured_at" in c else ""
    equal = "equal" if c["equal_to_transform_over_final_source"] else "NOT equal"
    return (
        f"{when}In one warm Spark session, a derived table in mode `{c['mode']}` over a source of hourly "
        f"readings ({c['source_rows_per_step']:,} rows per hour): the job builds each hour's step, the "
        "source's hour then changes (not timed), and the job rebuilds the step as the protocol's rebuild "
        "request reaches it (the window's rows deleted and the transform's result added in one Iceberg "
        f"commit). Median in-job seconds per step over {c['steps']} steps: first build "
        f"**{c['build_median_seconds']:.2f} s**, rebuild **{c['rebuild_median_seconds']:.2f} s** "
        f"(**{c['ratio']:.2f}x**). Afterwards the derived table is {equal} to its transform over the final "
        "source. What a rebuild adds is the window's delete in the same commit; what it costs the "
        "deployment besides is one more job of the derived table (a cold batch on Dataproc Serverless "
        "unless the warm driver serves it), queued once per source change.\n"
    )
