"""`python -m turnstile_dev.bench [--tables T --batches N --files F --rows R --quick]` (`make bench`).

`--only quality_cost` runs only what expectations and audits cost (`quality_cost`, on `--batches`
batches, default 50) and puts it, dated, into the `<out>/results.json` and `results.md` of the last
full run (`make bench BENCH_ARGS="--only quality_cost"`); `--only rebuild_cost` the same for what a
derived step's rebuild costs beside its first build (`rebuild_cost`, on `--batches` steps, default 20);
`--only spool_ops` the spool's storage operations (in process, a second or so).

Runs every contender one after another on this machine, alone, on the same workload: (a) turnstile
coalescing and (b') one job per batch on a local stack with a warm driver, the single-batch latency
on that stack, (b) one job per batch and (e) coalescing on a second stack whose every job is its own
Spark application, (c) Structured Streaming, (d) the floor; then writes
`<out>/results.json`, `<out>/results.md` and `<out>/chart.png`. Scratch data goes to `<work>`,
emptied first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from turnstile.jobs.local_spark import check_java, ensure_jars
from turnstile.local import emulator
from turnstile.local.stack import StackOptions
from turnstile.store.gcs import GcsStore, make_client
from turnstile_dev.bench import (
    console,
    costmodel,
    counting,
    floor,
    job_cost,
    latency,
    machine,
    policy_replay,
    quality_cost,
    rebuild_cost,
    report,
    s3_requests,
    scale,
    spool_ops,
    streaming,
    verify,
)
from turnstile_dev.bench.labels import COLD
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup
from turnstile_dev.bench.turnstile_stack import CATALOG, SPOOL_POLL_SECONDS, StackRun, TurnstileStack
from turnstile_dev.bench.workload import Workload

BENCH_CATALOG = "bench"
COLD_COALESCED_BATCHES = 10  # (e): one job of the default max_batches_per_job per table
T = TypeVar("T")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile_dev.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--tables", type=int, help="tables (default 2; --quick: 1)")
    parser.add_argument("--batches", type=int, help="batches per table (default 100; --quick: 3)")
    parser.add_argument("--files", type=int, help="CSV files per batch (default 2; --quick: 1)")
    parser.add_argument("--rows", type=int, help="rows per file (default 1000; --quick: 100)")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny workload: checks the plumbing in ~1.5 min"
    )
    parser.add_argument(
        "--per-batch-batches",
        type=int,
        help="batches per table for one job per batch, whose cost per batch is flat (default 5; --quick: 1)",
    )
    parser.add_argument(
        "--cold-coalesced-batches",
        type=int,
        help="batches per table for (e), coalescing with every job its own Spark application "
        "(default 10, one full job of max_batches_per_job; --quick: 3)",
    )
    parser.add_argument(
        "--job-cost-batches", type=int, help="batches of the job-overhead figure (default 40)"
    )
    parser.add_argument(
        "--latency-runs",
        type=int,
        help="single batches timed from `_SUCCESS` to commit on the warm stack (default 15; --quick: 3)",
    )
    parser.add_argument(
        "--sweep-every",
        type=float,
        default=StackOptions.sweep_every,
        help="the local stack's sweeper period, s (default: the stack's own)",
    )
    parser.add_argument(
        "--only",
        choices=["quality_cost", "rebuild_cost", "spool_ops"],
        help="run only this part, into the last full run's results (default: everything)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench"), help="where the results go")
    parser.add_argument("--work", type=Path, default=Path("bench/work"), help="scratch folder (emptied)")
    parser.add_argument("--jars", type=Path, default=Path(".turnstile/jars"), help="local Spark/Iceberg jars")
    return parser.parse_args(argv)


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        quick = bool(args.quick)
        self.quick = quick
        self.workload = Workload(
            tables=args.tables or (1 if quick else 2),
            batches=args.batches or (3 if quick else 100),
            files=args.files or (1 if quick else 2),
            rows=args.rows or (100 if quick else 1000),
        )
        self.per_batch_batches = min(args.per_batch_batches or (1 if quick else 5), self.workload.batches)
        self.cold_coalesced_batches = min(
            args.cold_coalesced_batches or (3 if quick else COLD_COALESCED_BATCHES), self.workload.batches
        )
        self.job_cost_batches = args.job_cost_batches or (2 if quick else 40)
        self.latency_runs = args.latency_runs or (3 if quick else 15)
        self.startup_repeats = 0 if quick else 2  # quick: the start-up of (b')'s one-batch jobs
        self.metadata_commits = 50 if quick else 1_000
        # depth, shallow, batches applied, repeats
        self.deep = (2_000, 10, 100, 3) if quick else (10_000, 10, 1_000, 5)
        self.many = (20, 2) if quick else (20, 10)  # tables, batches each
        self.console_size = (26, 260, 1) if quick else (200, 10_000, 5)  # tables, batches, loads per page
        self.big_batch_files = 200 if quick else 2_000  # the S3 part's batch of many files
        self.sweep_every = float(args.sweep_every)
        self.out: Path = args.out
        self.work: Path = args.work.resolve()
        self.jars: Path = args.jars
        self.phases: dict[str, float] = {}
        self.other_cpu: dict[str, float] = {}  # CPU-seconds other processes used, per phase
        self.other = machine.OtherLoad()
        self.results: dict[str, Any] = {}
        self.jars_built: list[Path] = []

    def phase(self, name: str, fn: Callable[[], T]) -> T:
        say(f"{name}...")
        started, other = time.monotonic(), self.other.seconds()
        value = fn()
        self.phases[name] = round(time.monotonic() - started, 1)
        self.other_cpu[name] = round(self.other.seconds() - other, 1)
        busy = (
            f" (other processes used {self.other_cpu[name]:.0f} CPU-s meanwhile)"
            if self.other_cpu[name] >= 1
            else ""
        )
        say(f"{name}: {self.phases[name]:.0f} s{busy}")
        return value

    def run(self) -> dict[str, Any]:
        self.other.start()
        try:
            return self._run()
        finally:
            self.other.stop()

    def _run(self) -> dict[str, Any]:
        started = time.monotonic()
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        check_java()
        jars = ensure_jars(self.jars)
        self.jars_built = jars
        say(f"workload: {self.workload.describe()}")
        counts = self.phase("in-process counts (functions/main.py, exact)", self.count)
        s3 = self.phase(
            "S3 requests (the Lambda handlers on moto)",
            lambda: s3_requests.measure(self.workload, self.big_batch_files),
        )
        depth, shallow, applied, repeats = self.deep
        deep = self.phase(
            "deep backlog",
            lambda: scale.deep_backlog(depth, shallow, applied, self.workload.files, repeats=repeats),
        )
        many = self.phase("many tables", self.many_tables)
        pages = self.phase("console page loads", lambda: console.run(*self.console_size))
        spool = self.phase("the spool's storage operations (in process)", spool_ops.measure)
        stack = TurnstileStack(self.work / "stack", self.sweep_every)
        self._seed_jars(jars, self.work / "stack" / "jars")
        self.phase("local stack start", stack.start)
        try:
            coalesced = self.phase(
                "(a) turnstile, coalescing",
                lambda: stack.run(
                    label="(a)",
                    dataset="coalesced",
                    workload=self.workload,
                    max_batches_per_job=None,
                    timeout=3600,
                    progress=say,
                ),
            )
            per_batch_warm = self.phase(
                "(b') turnstile, one job per batch, warm driver",
                lambda: stack.run(
                    label="(b')",
                    dataset="perbatch",
                    workload=self.workload.prefix(self.per_batch_batches),
                    max_batches_per_job=1,
                    timeout=3600,
                    progress=say,
                ),
            )
            single = self.phase(
                "single-batch latency",
                lambda: latency.run(stack, self.workload, self.latency_runs, 600, say),
            )
            startups = (
                self.phase("local job start-up", lambda: stack.startup(self.workload, self.startup_repeats))
                if self.startup_repeats
                else [
                    {"job_seconds": j.seconds, "batch_seconds_inside_job": s}
                    for j, s in zip(per_batch_warm.jobs, per_batch_warm.batch_seconds, strict=False)
                ]
            )
        finally:
            stack.stop()
        per_batch, coalesced_cold = self.phase(
            "(b) one job per batch and (e) coalescing, one Spark application each",
            lambda: self.cold(stack.warehouse),
        )
        spooled, spooled_single = self.phase(
            "(a) and the single-batch latency through the bucket's spool",
            lambda: self.through_spool(stack.warehouse),
        )
        setup = SparkSetup(jars, {BENCH_CATALOG: self.work / "warehouse", CATALOG: stack.warehouse})
        sss = self.phase(
            "(c) Structured Streaming", lambda: streaming.run(setup, BENCH_CATALOG, self.workload, self.work)
        )
        low = self.phase("(d) floor", lambda: floor.run(setup, BENCH_CATALOG, self.workload, self.work))
        turnstile_tables = (
            coalesced.tables
            + per_batch.tables
            + per_batch_warm.tables
            + coalesced_cold.tables
            + spooled.tables
            + [single.table, spooled_single.table]
        )
        cost = self.phase(
            "job overhead (and reading back the turnstile tables)",
            lambda: job_cost.run(
                setup,
                BENCH_CATALOG,
                self.workload,
                batches=self.job_cost_batches,
                work=self.work,
                verify=turnstile_tables,
                metadata_commits=self.metadata_commits,
                quality=True,
            ),
        )
        turnstile_found = cost.result["steps"][0]["tables"]
        growth = next(s for s in cost.result["steps"] if "metadata_json_bytes" in s)
        quality = next(s for s in cost.result["steps"] if "quality_cost" in s)
        rebuilds = next(s for s in cost.result["steps"] if "rebuild_cost" in s)
        cost_result = cost.result["steps"][-1]
        self.results = self.assemble(
            jars=jars,
            counts=counts,
            deep=deep,
            many=many,
            coalesced=coalesced,
            per_batch=per_batch,
            per_batch_warm=per_batch_warm,
            coalesced_cold=coalesced_cold,
            coalesced_spool=spooled,
            turnstile_found={t: turnstile_found[t] for t in turnstile_tables},
            single_latency=latency.summary(single, turnstile_found[single.table]),
            single_latency_spool=latency.summary(spooled_single, turnstile_found[spooled_single.table]),
            startups=startups,
            sss=sss,
            low=low,
            cost=cost_result,
        )
        self.results |= {
            "metadata_growth": growth,
            "quality_cost": quality["quality_cost"],
            "audit_branch_growth": quality["audit_branch_growth"],
            "rebuild_cost": rebuilds["rebuild_cost"],
            "console": pages,
            "spool_ops": spool,
            "s3": s3,
        }
        self.results["s3_requests_per_batch"] = s3["coalesced_state_bucket"]["requests_per_batch"]
        self.phases["total"] = round(time.monotonic() - started, 1)
        self.results["phases_seconds"] = self.phases
        self.results["other_processes_cpu_seconds"] = self.other_cpu | {
            "total": round(self.other.seconds(), 1)
        }
        top = sorted(self.other.by_command.items(), key=lambda kv: -kv[1])[:5]
        self.results["other_processes_top"] = {command: round(seconds, 1) for command, seconds in top}
        return self.results

    @contextmanager
    def _another_stack(self, name: str, warehouse: Path, **options: bool) -> Iterator[TurnstileStack]:
        """A second (third) local stack, writing into the first stack's warehouse, stopped after."""
        home = self.work / name
        stack = TurnstileStack(home, self.sweep_every, warehouse=warehouse, **options)
        self._seed_jars(self.jars_built, home / "jars")
        stack.start()
        try:
            yield stack
        finally:
            stack.stop()

    def _run_on(
        self, stack: TurnstileStack, label: str, dataset: str, workload: Workload, k: int | None
    ) -> StackRun:
        return stack.run(
            label=label, dataset=dataset, workload=workload, max_batches_per_job=k, timeout=3600, progress=say
        )

    def cold(self, warehouse: Path) -> tuple[StackRun, StackRun]:
        """(b), then (e), on a stack whose local runner gives every job its own spark-submit
        (`LOCAL_DRIVER=cold`): one job per batch and coalescing, both paying a Spark application's
        start-up per job, as on Dataproc."""
        with self._another_stack("stack-cold", warehouse, cold=True) as stack:
            per_batch = self._run_on(
                stack, "(b)", "perbatchcold", self.workload.prefix(self.per_batch_batches), 1
            )
            coalesced = self._run_on(
                stack, "(e)", "coalescedcold", self.workload.prefix(self.cold_coalesced_batches), None
            )
            return per_batch, coalesced

    def through_spool(self, warehouse: Path) -> tuple[StackRun, latency.LatencyRun]:
        """(a) and the single-batch latency again, on a stack whose jobs go through the bucket's
        spool to the warm driver of DRIVER=warm (`LOCAL_DRIVER=spool`): production's path, the
        driver a spark-submit where Dataproc creates a batch."""
        with self._another_stack("stack-spool", warehouse, spool=True) as stack:
            coalesced = self._run_on(stack, "(s) through the spool", "coalescedspool", self.workload, None)
            single = latency.run(stack, self.workload, self.latency_runs, 600, say, dataset="latencyspool")
            return coalesced, single

    def _seed_jars(self, jars: list[Path], target: Path) -> None:
        """The stack builds its jars in its home: give it the ones already built (same mtimes)."""
        target.mkdir(parents=True, exist_ok=True)
        for jar in jars:
            if jar.parent.resolve() == self.jars.resolve():
                shutil.copy2(jar, target / jar.name)

    def count(self) -> dict[str, Any]:
        server = emulator.start(self.work, backend="memory")
        try:
            found = {}
            for label, dataset, limit, apart in (
                ("coalesced", "coalesced", None, False),
                ("coalesced_state_bucket", "apart", None, True),
                ("one_job_per_batch", "perbatch", 1, False),
            ):
                server.create_bucket(f"count-{dataset}")
                store = GcsStore(make_client("local", server.url), f"count-{dataset}")
                state = None
                if apart:  # STATE_BUCKET: turnstile's own objects in a bucket no trigger watches
                    server.create_bucket(f"count-{dataset}-state")
                    state = GcsStore(make_client("local", server.url), f"count-{dataset}-state")
                found[label] = counting.run_workload(store, self.workload, dataset, limit, state)
            return found
        finally:
            server.stop()

    def many_tables(self) -> dict[str, Any]:
        server = emulator.start(self.work, backend="memory")

        def store_for(name: str) -> GcsStore:
            server.create_bucket(name)
            return GcsStore(make_client("local", server.url), name)

        try:
            return scale.many_tables(store_for, *self.many, self.workload.files)
        finally:
            server.stop()

    def assemble(
        self,
        *,
        jars: list[Path],
        counts: dict[str, Any],
        deep: dict[str, Any],
        many: dict[str, Any],
        coalesced: StackRun,
        per_batch: StackRun,
        per_batch_warm: StackRun,
        coalesced_cold: StackRun,
        coalesced_spool: StackRun,
        turnstile_found: dict[str, Any],
        single_latency: dict[str, Any],
        single_latency_spool: dict[str, Any],
        startups: list[dict[str, float]],
        sss: SparkRun,
        low: SparkRun,
        cost: dict[str, Any],
    ) -> dict[str, Any]:
        w = self.workload
        rows_per_batch = w.files * w.rows
        contenders: dict[str, Any] = {}
        violations: dict[str, Any] = {}
        for key, run in (
            ("coalesced", coalesced),
            ("one_job_per_batch", per_batch),
            ("one_job_per_batch_warm_driver", per_batch_warm),
            ("coalesced_cold", coalesced_cold),
            ("coalesced_spool", coalesced_spool),
        ):
            found = {t: turnstile_found[t] for t in run.tables}
            last = max((verify.last_commit_ms(f) or 0) for f in found.values()) / 1000
            data, tags = verify.Violations(), verify.Violations()
            for f in found.values():
                data.add(verify.violations(f, run.workload.batches, rows_per_batch))
                tags.add(verify.rel_violations(f, run.workload.rels()))
            contenders[key] = self._contender(
                run.workload,
                last - run.gate_opened,
                len(run.jobs) if key in COLD else max(run.drivers, 1),  # else the warm driver(s)
                sum(len(f["commits"]) for f in found.values()),
            ) | {
                "turnstile_jobs": len(run.jobs),
                "cpu_seconds_per_batch": round(run.cpu_seconds / run.workload.total_batches, 3),
                "run": run.as_dict(),
            }
            violations[key] = data.as_dict() | {"from_turnstile_rel": tags.as_dict()}
        for key, spark_run in (("structured_streaming", sss), ("floor", low)):
            step = spark_run.result["steps"][-1]
            found = step["tables"]
            last = max((verify.last_commit_ms(f) or 0) for f in found.values()) / 1000
            data = verify.Violations()
            for f in found.values():
                data.add(verify.violations(f, w.batches, rows_per_batch))
            contenders[key] = self._contender(
                w, last - spark_run.launched_at, 1, sum(len(f["commits"]) for f in found.values())
            ) | {
                "session_start_seconds": round(spark_run.result["session_ready"] - spark_run.launched_at, 2),
                "applied_order_sample": [
                    [int(s) for s in c["seqs"]] for c in next(iter(found.values()))["commits"][:20]
                ],
            }
            violations[key] = data.as_dict()
        per = {k: v["seconds_per_batch"] for k, v in contenders.items()}
        job_total, bare_total = sum(cost["job_seconds"]), sum(cost["bare_seconds"])
        startup_runs = [s["job_seconds"] for s in startups]
        # What a job costs beyond its batch: submit to end minus the batch's own seconds in that job.
        startup = statistics.median(s["job_seconds"] - s["batch_seconds_inside_job"] for s in startups)
        coalescing, apart = counts["coalesced"], counts["coalesced_state_bucket"]
        per_job = counts["one_job_per_batch"]
        k_coalesced = coalescing["batches"] / max(coalescing["jobs"], 1)
        k_single = per_job["batches"] / max(per_job["jobs"], 1)
        by_kind = [
            {
                f"{who} {op}": n
                for who in ("function", "job")
                for op, n in c[f"{who}_ops_by_operation_per_batch"].items()
            }
            for c in (coalescing, per_job)
        ]
        batch_seconds = statistics.median(coalesced.batch_seconds) if coalesced.batch_seconds else 0.0
        results: dict[str, Any] = {
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "quick": self.quick,
            "machine": machine.describe(str(jars[0])),
            "workload": {
                "tables": w.tables,
                "batches": w.batches,
                "files": w.files,
                "rows": w.rows,
                "window": w.window,
                "seed": w.seed,
                "total_batches": w.total_batches,
                "total_rows": w.total_rows,
                "one_job_per_batch_batches_per_table": self.per_batch_batches,
                "coalesced_cold_batches_per_table": self.cold_coalesced_batches,
            },
            "settings": {
                "sweep_every_seconds": self.sweep_every,
                "spark_master": "local[2]",
                "spool_poll_seconds": SPOOL_POLL_SECONDS,
            },
            # Like for like: coalescing against one job per batch, both warm, then both cold.
            "coalescing_speedup_warm": per["one_job_per_batch_warm_driver"] / per["coalesced"],
            "coalescing_speedup_cold": per["one_job_per_batch"] / per["coalesced_cold"],
            # Two changes at once (warm coalescing against cold one job per batch): not a headline.
            "warm_coalescing_vs_cold_one_job_per_batch": per["one_job_per_batch"] / per["coalesced"],
            "ratio_vs_structured_streaming": per["coalesced"] / per["structured_streaming"],
            "ratio_vs_floor": per["coalesced"] / per["floor"],
            # Production's path on this machine: jobs through the bucket's spool to DRIVER=warm's driver.
            "ratio_vs_structured_streaming_spool": per["coalesced_spool"] / per["structured_streaming"],
            "ratio_vs_floor_spool": per["coalesced_spool"] / per["floor"],
            "storage_ops_per_batch": coalescing["storage_ops_per_batch"],
            "storage_ops_per_batch_one_job_per_batch": per_job["storage_ops_per_batch"],
            # Invocations are judged with a state bucket (STATE_BUCKET), the deployment that sets out
            # to save them; the one-bucket figures stay beside them.
            "invocations_per_batch": apart["invocations_per_batch"],
            "acting_invocations_per_batch": apart["acting_invocations_per_batch"],
            "invocations_per_batch_without_data_files": apart["invocations_per_batch_without_data_files"],
            "invocations_per_batch_one_bucket": coalescing["invocations_per_batch"],
            "invocations_per_batch_without_data_files_one_bucket": coalescing[
                "invocations_per_batch_without_data_files"
            ],
            "storage_ops_per_batch_state_bucket": apart["storage_ops_per_batch"],
            "function_seconds_per_batch": coalescing["function_seconds_per_batch"],
            "ops_formula": costmodel.ops_formula(
                [
                    (k_single, per_job["storage_ops_per_batch"]),
                    (k_coalesced, coalescing["storage_ops_per_batch"]),
                ]
            )
            | {"k_measured": [round(k_single, 2), round(k_coalesced, 2)]},
            "ops_formula_by_kind": costmodel.ops_formula_by_kind(
                k_single, by_kind[1], k_coalesced, by_kind[0]
            ),
            "dataproc_cost_model": costmodel.dataproc(batch_seconds, [1, 10, 100]),
            "driver_policy_replay": policy_replay.rows(batch_seconds) if batch_seconds > 0 else [],
            "deep_backlog_ratio": deep["deep_backlog_ratio"],
            "violations": violations,
            "job_overhead_ratio": job_total / bare_total,
            "local_job_startup_seconds": startup,
            # Each cold job applies one batch: what it costs beyond that batch, on average.
            "cold_job_startup_seconds": (
                sum(j.seconds for j in per_batch.jobs) - sum(per_batch.batch_seconds)
            )
            / max(len(per_batch.jobs), 1),
            "contenders": contenders,
            "counting": counts,
            "scale": {"deep_backlog": deep, "many_tables": many},
            "job_cost": cost
            | {
                "job_rows_per_second": cost["batches"] * cost["rows_per_batch"] / job_total,
                "bare_rows_per_second": cost["batches"] * cost["rows_per_batch"] / bare_total,
            },
            "startup": {
                "runs_seconds": startup_runs,
                "warm_first_batch_seconds": cost["warm_first_batch_seconds"],
                "source": "dedicated one-batch jobs"
                if self.startup_repeats
                else "the one-batch jobs of (b')",
            },
        }
        results["single_batch_latency"] = single_latency
        results["single_batch_latency_spool"] = single_latency_spool
        results["targets"] = report.targets(results)
        return results

    @staticmethod
    def _contender(workload: Workload, wall: float, applications: int, commits: int) -> dict[str, Any]:
        return {
            "batches": workload.total_batches,
            "rows": workload.total_rows,
            "wall_seconds": round(wall, 2),
            "seconds_per_batch": wall / workload.total_batches,
            "rows_per_second": workload.total_rows / wall,
            "spark_applications": applications,
            "commits": commits,
        }


def _apart(args: argparse.Namespace) -> tuple[SparkSetup, Path]:
    """An `--only` run's Spark setup over an emptied scratch folder."""
    work: Path = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    check_java()
    return SparkSetup(ensure_jars(args.jars), {BENCH_CATALOG: work / "warehouse"}), work


def _written_apart(out: Path, measured: dict[str, dict[str, Any]], wall_seconds: float) -> None:
    """`measured` put, dated, into the last full run's results.json, and results.md rendered again
    (it says they were measured apart)."""
    when = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    for key, found in measured.items():
        results[key] = found | {"measured_at": when, "wall_seconds": round(wall_seconds, 1)}
    report.write(results, out)


def quality_only(args: argparse.Namespace) -> int:
    """`--only quality_cost`: measured in its own Spark application, then written into the last full
    run's results."""
    out: Path = args.out
    setup, work = _apart(args)
    measured = args.batches or 50  # and one warm-up batch before them
    workload = Workload(tables=1, batches=measured + 1, files=args.files or 2, rows=args.rows or 1000)
    say(f"quality_cost: {measured} batches of {workload.files * workload.rows:,} rows...")
    run = quality_cost.run(setup, BENCH_CATALOG, workload, work=work)
    found = run.result["steps"][0]
    _written_apart(out, {k: found[k] for k in ("quality_cost", "audit_branch_growth")}, run.wall_seconds)
    q = found["quality_cost"]
    say(
        f"quality_cost: {q['checked_median_seconds']:.2f} s with, {q['plain_median_seconds']:.2f} s "
        f"without: {q['ratio']:.2f}x; wrote {out / 'results.md'}"
    )
    return 0


def rebuild_only(args: argparse.Namespace) -> int:
    """`--only rebuild_cost`: a derived step's rebuild against its first build, on `--batches`
    steps (default 20) of `--rows` source rows each (default 2,000), into the last full run's results."""
    out: Path = args.out
    setup, work = _apart(args)
    steps, rows = args.batches or 20, args.rows or 2000
    say(f"rebuild_cost: {steps} steps over {rows:,} source rows each...")
    run = rebuild_cost.run(setup, BENCH_CATALOG, steps=steps, rows=rows, work=work)
    found = run.result["steps"][0]["rebuild_cost"]
    _written_apart(out, {"rebuild_cost": found}, run.wall_seconds)
    say(
        f"rebuild_cost: first build {found['build_median_seconds']:.2f} s, rebuild "
        f"{found['rebuild_median_seconds']:.2f} s per step: {found['ratio']:.2f}x; wrote {out / 'results.md'}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.only == "quality_cost":
        return quality_only(args)
    if args.only == "rebuild_cost":
        return rebuild_only(args)
    if args.only == "spool_ops":  # in process, no Spark: counted again into the last full run's results
        started = time.monotonic()
        _written_apart(args.out, {"spool_ops": spool_ops.measure()}, time.monotonic() - started)
        say(f"spool_ops: wrote {args.out / 'results.md'}")
        return 0
    bench = Bench(args)
    results = bench.run()
    report.write(results, bench.out)
    say(
        f"wrote {bench.out / 'results.md'}, results.json and chart.png "
        f"in {results['phases_seconds']['total']:.0f} s"
    )
    for line in report.summary_lines(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
