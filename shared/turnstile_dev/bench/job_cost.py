"""Issue 4's figures: what the job costs over a bare Spark read-and-append, and what starting one
local job costs.

In one warm session, batch by batch and alternating which goes first, the same files are applied
by the job (`execution.execute` over a one-batch manifest, with `IcebergApplier`: read with the
configured schema setting bad rows aside, the committed-batch ledger, the tagged commit, the result
record) and by a bare `spark.read.csv(...).writeTo(table).append()`. Spark reads the files in place
(as it reads `gs://` on Dataproc); the bucket side is an in-memory store. The job's time is also
split by step, so an overhead above target says where it goes.

Start-up: the same one-batch job under spark-submit (through the local runner, see
`turnstile_stack.startup`) against the time that batch takes in this warm session, where it also
creates its table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from turnstile.config.load_config import LoadConfig
from turnstile.core.clock import SystemClock
from turnstile.spark import commits, reading
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import Located
from turnstile.state.execution import execute
from turnstile.state.records import Manifest, ManifestBatch
from turnstile.store.memory import MemoryStore
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup, submit
from turnstile_dev.bench.workload import SCHEMA, Workload

NAMESPACE_JOB = "cost_job"
NAMESPACE_BARE = "cost_bare"
NAMESPACE_FIRST = "cost_first"
REBUILD_STEPS = 20  # derived steps built, then rebuilt, in the full run
T = TypeVar("T")
# The job's steps timed separately, where the library has them: (module, function, label).
TIMED: tuple[tuple[Any, str, str], ...] = (
    (reading, "read", "read (with bad-row detection)"),
    (commits, "committed_batches", "committed-batch ledger"),
    (commits, "tagged_commit", "finding its tagged commit"),
    (commits, "table_exists", "table lookup"),
)


def run(
    setup: SparkSetup,
    catalog: str,
    workload: Workload,
    *,
    batches: int,
    work: Path,
    verify: list[str],
    metadata_commits: int = 0,
    quality: bool = False,
) -> SparkRun:
    """Measure on the first `batches` batches of one table; read back the `verify` tables first,
    then (with `metadata_commits`) grow a table's metadata, then (with `quality`) what expectations
    and audits cost (`quality_cost`) and what a derived step's rebuild costs (`rebuild_cost`); the
    job's cost is the last step."""
    paths = workload.with_tables(1).prefix(batches + 1).write_batches(work / "job-cost-source")
    steps: list[dict[str, Any]] = [{"task": "verify", "tables": verify}] if verify else []
    if metadata_commits:
        steps.append({"task": "metadata_growth", "catalog": catalog, "commits": metadata_commits})
    rows = workload.files * workload.rows
    if quality:
        steps.append({"task": "quality_cost", "catalog": catalog, "batches": paths, "rows": rows})
        steps.append({"task": "rebuild_cost", "catalog": catalog, "steps": REBUILD_STEPS, "rows": rows})
    steps.append({"task": "job_cost", "catalog": catalog, "batches": paths, "rows": rows})
    return submit(setup, "job-cost", steps, work / "spark")


class _LocalFiles:
    """`Staging` for files already on this machine: the manifest's URIs name them."""

    def __init__(self) -> None:
        self.mapping: dict[str, str] = {}

    def locate(self, uris: Sequence[str], sizes: Sequence[int] | None = None) -> Located:
        paths = [self.mapping[u] for u in uris]
        return Located(paths, sum(os.path.getsize(p) for p in paths))


class _Timers:
    """Seconds per step; a step called inside another counts for the outer one only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._depth = 0

    def wrap(self, step: str, fn: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any, **kwargs: Any) -> T:
            self._depth += 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - started

        return timed


class _Session:
    """The job and the bare append over the same files, in one Spark session."""

    def __init__(self, spark: Any, catalog: str, batches: list[list[str]]) -> None:
        self.spark = spark
        self.catalog = catalog
        self.batches = batches
        self.store = MemoryStore("bench")
        self.files = _LocalFiles()
        self.applier = IcebergApplier(spark, catalog, self.files, lambda bucket: self.store, "bench")
        self.load = LoadConfig.model_validate({"schema": SCHEMA})
        self.spark_jobs: dict[str, int] = {}
        self._calls = 0

    def manifest(self, namespace: str, index: int) -> Manifest:
        rel = Workload.rel(index)
        uris = []
        for path in self.batches[index]:
            uri = f"gs://bench/{namespace}/t0/{rel}/{Path(path).name}"
            self.files.mapping[uri] = path
            uris.append(uri)
        batch = ManifestBatch(
            dataset=namespace,
            table="t0",
            table_prefix=f"{namespace}/t0",
            rel=rel,
            success_generation=index + 1,
            data_uris=tuple(uris),
            load=self.load,
            config_digest="bench",
            result=f"{namespace}/t0/_turnstile/results/{rel}/{index + 1}.json",
            failed_prefix=f"{namespace}/t0/_failed/{rel}/",
        )
        return Manifest(
            job_id=f"bench-{namespace}-{index}",
            bucket="bench",
            batches=(batch,),
            done_signal=f"{namespace}/t0/_turnstile/jobs/bench-{index}.done",
            ordered=True,
        )

    def job(self, namespace: str, index: int) -> float:
        started = time.perf_counter()
        with self.counting("job"):
            done = execute(self.store, self.manifest(namespace, index), self.applier, SystemClock())
        if not done.succeeded:
            raise RuntimeError(f"the job failed on batch {index}: {done.error}")
        return time.perf_counter() - started

    def bare(self, index: int) -> float:
        started = time.perf_counter()
        name = f"{self.catalog}.{NAMESPACE_BARE}.t0"
        with self.counting("bare"):
            reader = self.spark.read.schema(SCHEMA).option("header", "true")
            reader.csv(self.batches[index]).writeTo(name).append()
        return time.perf_counter() - started

    @contextmanager
    def counting(self, what: str) -> Iterator[None]:
        """Count the Spark jobs run inside the block (a job group per call, named apart from every
        other session's: the status tracker keeps a group's jobs for the whole application)."""
        self._calls += 1
        group = f"bench-{what}-{id(self):x}-{self._calls}"
        context = self.spark.sparkContext
        context.setJobGroup(group, group)
        try:
            yield
        finally:
            context.setJobGroup("bench-idle", "bench-idle")
            jobs = len(context.statusTracker().getJobIdsForGroup(group))
            self.spark_jobs[what] = self.spark_jobs.get(what, 0) + jobs


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    catalog: str = step["catalog"]
    session = _Session(spark, catalog, step["batches"])
    for namespace in (NAMESPACE_JOB, NAMESPACE_BARE, NAMESPACE_FIRST):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {catalog}.{NAMESPACE_BARE}.t0 ({SCHEMA}) USING iceberg")
    # Warm-up: batch 0 both ways (it also creates the job's table), not measured.
    session.job(NAMESPACE_JOB, 0)
    session.bare(0)
    timers = _Timers()
    session.spark_jobs.clear()
    originals = [(module, name, getattr(module, name)) for module, name, _ in TIMED if hasattr(module, name)]
    for module, name, label in TIMED:
        if hasattr(module, name):
            setattr(module, name, timers.wrap(label, getattr(module, name)))
    job_seconds: list[float] = []
    bare_seconds: list[float] = []
    try:
        for index in range(1, len(session.batches)):
            if index % 2:
                job_seconds.append(session.job(NAMESPACE_JOB, index))
                bare_seconds.append(session.bare(index))
            else:
                bare_seconds.append(session.bare(index))
                job_seconds.append(session.job(NAMESPACE_JOB, index))
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
    spark_jobs = dict(session.spark_jobs)
    # The batch a one-batch local job applies, here in the warm session, creating its table too.
    first = session.job(NAMESPACE_FIRST, 0)
    steps = dict(timers.seconds)
    steps["write and the rest"] = max(sum(job_seconds) - sum(steps.values()), 0.0)
    return {
        "batches": len(job_seconds),
        "rows_per_batch": step["rows"],
        "job_seconds": job_seconds,
        "bare_seconds": bare_seconds,
        "job_steps_seconds": steps,
        "spark_jobs_per_batch": {k: v / max(len(job_seconds), 1) for k, v in spark_jobs.items()},
        "warm_first_batch_seconds": first,
    }
