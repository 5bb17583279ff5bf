"""Writes the benchmark's results: results.json (every figure), results.md (read by people) and
chart.png (seconds per batch of each contender; turnstile's storage operations per batch by call
site)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from turnstile_dev.bench import (
    console,
    latency,
    missed,
    policy_replay,
    quality_report,
    rebuild_cost,
    spool_ops,
)
from turnstile_dev.bench.labels import LABELS, SHORT, TURNSTILE


def _target(value: float, bound: float, at_least: bool = False) -> dict[str, Any]:
    met = value >= bound if at_least else value <= bound
    return {"target": f"{'>=' if at_least else '<='} {bound:g}", "value": round(value, 3), "met": met}


def targets(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    checked = [r["violations"][k] for k in TURNSTILE] + [
        r[key]["violations"] for key in ("single_batch_latency", "single_batch_latency_spool") if key in r
    ]
    ordered = sum(v["total"] for v in checked)
    tags = sum(v["from_turnstile_rel"]["total"] for v in checked)
    return {
        "ratio_vs_structured_streaming": _target(r["ratio_vs_structured_streaming"], 1.5),
        "ratio_vs_floor": _target(r["ratio_vs_floor"], 2),
        "ratio_vs_structured_streaming_spool": _target(r["ratio_vs_structured_streaming_spool"], 1.2),
        "ratio_vs_floor_spool": _target(r["ratio_vs_floor_spool"], 1.6),
        "single_batch_latency_spool_median": _target(r["single_batch_latency_spool"]["median_seconds"], 1.5),
        "single_batch_latency_spool_p95": _target(r["single_batch_latency_spool"]["p95_seconds"], 2.5),
        "storage_ops_per_batch": _target(r["storage_ops_per_batch"], 6),
        "invocations_per_batch": _target(r["invocations_per_batch"], 4),
        "invocations_per_batch_without_data_files": _target(r["invocations_per_batch_without_data_files"], 2),
        "deep_backlog_ratio": _target(r["deep_backlog_ratio"], 1.2),
        "violations": _target(ordered + tags, 0),
        "job_overhead_ratio": _target(r["job_overhead_ratio"], 1.3),
    }


def write(r: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(r, indent=1, sort_keys=False) + "\n")
    chart(r, out / "chart.png")
    (out / "results.md").write_text(markdown(r))


def summary_lines(r: dict[str, Any]) -> list[str]:
    lines = []
    for name, t in r["targets"].items():
        lines.append(
            f"  {name:<32} {t['value']:>10g}   target {t['target']:<7} {'met' if t['met'] else 'MISSED'}"
        )
    latency_seconds = r["single_batch_latency"]
    lines.insert(0, f"  {'coalescing speedup, both cold':<32} {r['coalescing_speedup_cold']:>10.3f}")
    lines.insert(0, f"  {'coalescing speedup, both warm':<32} {r['coalescing_speedup_warm']:>10.3f}")
    lines.append(
        f"  {'latency median / p95 s':<32} {latency_seconds['median_seconds']:>10.2f} / "
        f"{latency_seconds['p95_seconds']:.2f}"
    )
    lines.append(f"  {'local_job_startup_seconds':<32} {r['local_job_startup_seconds']:>10.2f}")
    lines.append(f"  {'cold_job_startup_seconds':<32} {r['cold_job_startup_seconds']:>10.2f}")
    return lines


# --- chart ------------------------------------------------------------------------------------


def chart(r: dict[str, Any], path: Path) -> None:
    contenders = r["contenders"]
    keys = [k for k in LABELS if k in contenders]
    fig = Figure(figsize=(14, 5.4))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.3, 1.2]})
    values = [contenders[k]["seconds_per_batch"] for k in keys]
    colors = ["#1f6fb4", "#8fb8de", "#3d7a3d", "#a9d18e", "#e07b39", "#6a9f58"][: len(keys)]
    bars = left.bar(range(len(keys)), values, color=colors)
    left.set_xticks(range(len(keys)), [f"{SHORT[k]}\n{_correctness(r, k)}" for k in keys], fontsize=7)
    if max(values) / min(values) > 20:
        left.set_yscale("log")
        left.yaxis.set_major_formatter(ScalarFormatter())
        left.yaxis.set_minor_formatter(NullFormatter())
        left.set_ylim(min(values) / 2, max(values) * 2)
        left.set_ylabel("seconds per batch (log scale; lower is better)")
    else:
        left.set_ylabel("seconds per batch (lower is better)")
    left.set_title("Wall time per batch until committed, same data, same Spark", fontsize=10)
    for bar, value in zip(bars, values, strict=True):
        left.annotate(
            f"{value:.2f} s", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=8
        )
    sites = r["counting"]["coalesced"]["function_ops_by_site_and_operation_per_batch"]
    top = list(sites.items())[:9]
    rest = sum(v for _, v in list(sites.items())[9:])
    if rest:
        top.append(("everything else", rest))
    job = r["counting"]["coalesced"]["job_ops_per_batch"]
    top.append(("the job (manifest, result record, done signal)", job))
    top.insert(0, ("all: functions + job", r["storage_ops_per_batch"]))
    names = [name for name, _ in top][::-1]
    counts = [value for _, value in top][::-1]
    right.barh(range(len(names)), counts, color="#1f6fb4")
    right.set_yticks(range(len(names)), names, fontsize=7)
    right.axvline(0, color="black", linewidth=0.5)
    right.axvline(6, color="#c0392b", linewidth=1, linestyle="--")
    right.annotate(
        "target for all: 6",
        (6, len(names) - 0.5),
        color="#c0392b",
        fontsize=7,
        xytext=(3, 0),
        textcoords="offset points",
    )
    total = r["storage_ops_per_batch"]
    right.set_title(f"(a) storage operations per batch by call site: {total:g} (target 6)", fontsize=10)
    right.set_xlabel("operations per batch (in-process run of the same workload)")
    for i, value in enumerate(counts):
        right.annotate(
            f"{value:g}", (value, i), va="center", fontsize=7, xytext=(3, 0), textcoords="offset points"
        )
    fig.suptitle(
        f"turnstile bench: {r['workload']['tables']} tables x {r['workload']['batches']} batches x "
        f"{r['workload']['files']} files x {r['workload']['rows']} rows, out of order, "
        f"{r['machine']['cores']} cores",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _correctness(r: dict[str, Any], key: str) -> str:
    v = r["violations"][key]
    wrong = v["out_of_order"] + v["twice"] + v["missing"]
    if not wrong:
        return "in order, once"
    return f"{v['out_of_order']} out of order\n{v['twice']} twice\n{v['missing']} missing"


# --- markdown ---------------------------------------------------------------------------------


def _f(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# Sections whose figures `--only` may measure in a run of their own: (key, title, renderer).
_MEASURED_APART: tuple[tuple[str, str, Callable[[dict[str, Any]], str]], ...] = (
    ("quality_cost", "What two expectations and an audit cost the job per batch", quality_report.cost),
    ("audit_branch_growth", "Snapshots of a table with audits, and their expiry", quality_report.growth),
    ("rebuild_cost", "What a rebuild of a derived step costs beside its first build", rebuild_cost.markdown),
)


def markdown(r: dict[str, Any]) -> str:
    w, m, c = r["workload"], r["machine"], r["contenders"]
    parts: list[str] = []
    add: Callable[[str], None] = parts.append
    add("# turnstile benchmark\n")
    add(
        f"Generated by `make bench` (`python -m turnstile_dev.bench{' --quick' if r['quick'] else ''}`) on "
        f"{r['generated_at']}; the whole run took {r['phases_seconds']['total']:.0f} s. Every figure below "
        "is measured in this one run, the contenders one after another on the same machine, and "
        "every comparison is a ratio of two such measurements.\n"
    )
    add(_contention(r))
    add("## Machine\n")
    add(
        _table(
            ["cores", "memory", "CPU", "OS", "Python", "Java", "Spark", "Iceberg", "Spark master"],
            [
                [
                    str(m["cores"]),
                    f"{m['memory_gib']} GiB",
                    str(m["cpu"]),
                    str(m["os"]),
                    str(m["python"]),
                    str(m["java"]),
                    str(m["spark"]),
                    str(m["iceberg"]),
                    str(m["spark_master"]),
                ]
            ],
        )
        + "\n"
    )
    add("## Workload and method\n")
    add(_method(r))
    add("## Headline figures\n")
    add(_headline(r))
    add("![chart](chart.png)\n")
    add("## Contenders\n")
    add(_contenders(r))
    add("## Function invocations and storage operations per batch\n")
    add(_counting(r))
    add("## S3 requests per batch\n")
    add(_s3(r))
    add("## Scale\n")
    add(_scale(r))
    add("## The job against a bare read-and-append, and a local job's start-up (issue 4)\n")
    add(_job_cost(r))
    add("## Single-batch latency on the warm local stack\n")
    add(latency.markdown(r))
    add("## Storage operations per batch as a function of batches per job\n")
    add(_formula(r))
    add("## Dataproc Serverless cost model\n")
    add(_dataproc(r))
    add("## Warm drivers on Dataproc: the stay-up policy replayed\n")
    add(_driver_policy(r))
    add("## The warm drivers' spool in the bucket: storage operations\n")
    add(spool_ops.markdown(r))
    add("## metadata.json after many commits\n")
    add(_metadata(r))
    for key, title, render in _MEASURED_APART:
        if key in r:
            add(f"## {title}\n")
            add(render(r))
    if "console" in r:
        add("## The operator console's page loads\n")
        add(console.markdown(r["console"]))
    add("## What missed its target, and why\n")
    add(missed.section(r))
    add("## Phases of this run\n")
    other = r["other_processes_cpu_seconds"]
    add(
        _table(
            ["phase", "seconds", "CPU-seconds used by other processes meanwhile"],
            [[k, _f(v, 0), _f(other.get(k, 0.0), 1)] for k, v in r["phases_seconds"].items()],
        )
        + "\n"
    )
    del w, c
    return "\n".join(parts)


def _contention(r: dict[str, Any]) -> str:
    """A warning when other processes competed for the cores during the run."""
    other, total = r["other_processes_cpu_seconds"], r["phases_seconds"]["total"]
    share = other["total"] / (total * (r["machine"]["cores"] or 1))
    top = ", ".join(f"{k} {v:g} s" for k, v in r["other_processes_top"].items())
    if share < 0.02:
        return (
            f"The machine was otherwise idle: processes outside the benchmark used {other['total']:g} "
            f"CPU-seconds in all ({share:.1%} of its capacity over the run).\n"
        )
    return (
        f"**Warning:** processes outside the benchmark used {other['total']:g} CPU-seconds during the run "
        f"({share:.0%} of the machine's capacity; most: {top}); the phases they overlapped are slower "
        "than they would be alone (see the last table).\n"
    )


def _method(r: dict[str, Any]) -> str:
    w = r["workload"]
    b = w["one_job_per_batch_batches_per_table"]
    e = w.get("coalesced_cold_batches_per_table", "-")
    sweep = r["settings"]["sweep_every_seconds"]
    over = (
        " (the issue's full workload would take (b) far past the 15-minute budget)"
        if b < w["batches"]
        else ""
    )
    shape = f"{w['tables']} tables x {w['batches']} batches x {w['files']} CSV files x {w['rows']} rows"
    return f"""- **Workload**: {shape}
  ({w["total_batches"]} batches, {w["total_rows"]:,} rows), the hourly layout
  `<dataset>/t<k>/YYYY/MM/DD/HH/part-*.csv` then `_SUCCESS`, with an explicit schema for every
  contender. Upstream delivers each table's batches shuffled within windows of {w["window"]}
  (seed {w["seed"]}), the tables interleaved. Every contender gets the same bytes.
- **(a)** the real local stack (fake-gcs-server, functions/main.py under functions-framework, the
  listing event bridge, local jobs in the local runner's folder-fed warm driver (`LOCAL_DRIVER=warm`;
  the local stack's default is (s)'s path): one spark-submit for the
  whole stack that runs the jobs, two tables' side by side, its JVM, session and catalog started by the
  first job of (a) and reused by every later job on that stack; Hadoop Iceberg catalog), ordered
  tables, default `max_batches_per_job` (10) and `max_bytes_per_job` (1 GiB).
- **(s)**: (a) again through the bucket's spool, on a third local stack with `LOCAL_DRIVER=spool`:
  production's path, each job a request in the bucket's spool (fake-gcs-server) served by the warm
  driver of DRIVER=warm (`WarmRunner`, `entrypoints/spool_driver.py`; two jobs side by
  side, as local Spark has two cores, where Dataproc's default `DRIVER_SLOTS` is 4; the stay-up
  policy at Dataproc's prices, `LOCAL_DRIVER_PRICES=dataproc`), launched as a
  spark-submit where Dataproc creates a batch, polling the spool every
  {r["settings"].get("spool_poll_seconds", "-")} s; then the single-batch latency on that stack.
- **(b')** the same protocol with `max_batches_per_job: 1` in `load.json` on (a)'s stack, in its
  warm driver (started by (a)): one job per batch, what the protocol costs per job when starting
  one costs nothing. (a) against (b') is `coalescing_speedup_warm`: one thing changes, the batches
  per job.
- **(e)** coalescing again (default `max_batches_per_job`), and **(b)** one job per batch again,
  on a second local stack whose runner gives every job a Spark application of its own
  (`LOCAL_DRIVER=cold`: a spark-submit of the job's main file, its own JVM, session and Iceberg
  catalog, started for the job and stopped after it), which is what every Dataproc Serverless job
  is without a warm driver. (e) against (b) is `coalescing_speedup_cold`, again one change. Same
  jars, Spark properties and warehouse as (a); the cold stack's tables' jobs run side by side, one
  application each, as the warm driver of (a) and (b') runs them side by side in one. (e) runs the
  first {e} batches of each table (one full job per table), (b) and (b') the first {b}
  batch(es) of each table: a job of one batch costs the same whichever batch it is, so their
  figures per batch compare{over}. Warm coalescing against cold one job per batch ((b) against
  (a)) changes two things at once and is no headline; it is in the contenders' notes.
  (a), (b'), (e) and (b) upload out of order behind `START_BACKFILL_FILENAME` and start the clock when
  the gate files are written, every batch queued: the same start as (c) and (d), every file in
  place. (Without the gate, a batch whose upload lags behind a later batch's commit stops an
  ordered table by design.)
  The stack's sweeper runs every {sweep:g} s (the section on the time between jobs says whether it
  mattered).
- **(c)** Spark Structured Streaming, CSV file source, `Trigger.AvailableNow`,
  `maxFilesPerTrigger` = {w["files"]} (files per batch), Iceberg sink, one query per table in one
  application; the same files in a local folder per table, written in arrival order with
  modification times following it. **(d)** one application, one thread per table, each batch read
  and appended in rel order.
- **Same Spark**: every application gets `turnstile.jobs.local_spark.spark_conf` (local[2], the same
  jars, catalog and tuning); all of them are started with spark-submit, JVM start-up included.
- **Wall time**: from the gate files (a, b', e, b) or spark-submit's start (c, d) to the last Iceberg
  commit among the contender's tables (`committed_at` of the last snapshot). Per-batch figures are
  that wall time over the batches committed.
- **Correctness**: read back from the Iceberg tables: each row carries its batch, the `_file`
  metadata column joined to `entries` says which commit added it, the snapshot chain gives the
  commit order. Out of order = committed after a batch that sorts after it; twice = rows there
  more than once; missing = not (completely) there; split = spread over several commits. For
  turnstile's contenders the same is also checked from the commits' `turnstile.rel` tags (and for
  the latency table).
- **Exact counts**: the stack's function host is another process, so invocations, storage
  operations and function-seconds come from the same workload run in process through
  functions/main.py (functions-framework's test client, a CloudEvent per finalized object) over
  fake-gcs-server, counted at the `ObjectStore` port, jobs run in process between deliveries
  (`InlineRunner`: the job's bucket side, without Spark). One function instance serves the
  workload, so its `_config/` cache (`CONFIG_CACHE_SECONDS`, default 60 s) is warm after the first
  batches, as on a deployed instance under steady load.
"""


def _headline(r: dict[str, Any]) -> str:
    k_one, k_many = r["ops_formula"]["k_measured"]
    rows = [
        [
            "`coalescing_speedup_warm`",
            f"{r['coalescing_speedup_warm']:.3f}",
            "-",
            "-",
            "(b') seconds per batch / (a) seconds per batch: one job per batch against coalescing, both "
            "in the warm driver",
        ],
        [
            "`coalescing_speedup_cold`",
            f"{r['coalescing_speedup_cold']:.3f}",
            "-",
            "-",
            "(b) seconds per batch / (e) seconds per batch: one job per batch against coalescing, every "
            "job its own Spark application (what each Dataproc Serverless batch is without a warm driver)",
        ],
    ]
    one_bucket = {
        "invocations_per_batch": r["invocations_per_batch_one_bucket"],
        "invocations_per_batch_without_data_files": r["invocations_per_batch_without_data_files_one_bucket"],
    }
    values = {
        "storage_ops_per_batch": f"{r['storage_ops_per_batch']:g} at K = {k_many:g}; "
        f"{r['storage_ops_per_batch_one_job_per_batch']:g} at K = 1",
    } | {
        name: f"{value:g} one bucket; {r['targets'][name]['value']:g} state bucket"
        for name, value in one_bucket.items()
    }
    notes = {
        "ratio_vs_structured_streaming": "(a) seconds per batch / (c) seconds per batch",
        "ratio_vs_floor": "(a) seconds per batch / (d) seconds per batch",
        "ratio_vs_structured_streaming_spool": "(s), (a) through the bucket's spool (production's path: "
        "`LOCAL_DRIVER=spool`) seconds per batch / (c) seconds per batch",
        "ratio_vs_floor_spool": "(s) seconds per batch / (d) seconds per batch",
        "single_batch_latency_spool_median": "`_SUCCESS` upload to its Iceberg commit through the bucket's "
        f"spool, median of {r['single_batch_latency_spool']['runs']} batches one after another, seconds",
        "single_batch_latency_spool_p95": "the same, 95th percentile (nearest rank), seconds",
        "storage_ops_per_batch": f"(a)'s workload, function + job, at the store port, K batches per job "
        f"(K = 1: one job per batch); turnstile's objects in the data bucket, the default; with a state "
        f"bucket (STATE_BUCKET) {r['storage_ops_per_batch_state_bucket']:g} at K = {k_many:g}. The target "
        f"is for K = {k_many:g} (K = {k_one:g} is the per-job run)",
        "invocations_per_batch": "(a), every event delivered: turnstile's objects in the data bucket (the "
        "default), then with a state bucket (STATE_BUCKET), which the target is for; with a state bucket "
        f"{r['acting_invocations_per_batch']:g} make a storage call",
        "invocations_per_batch_without_data_files": "(a), the events of `_SUCCESS`, the jobs' `.done` "
        "signals and the gates: one bucket (the default), then with a state bucket, which the target is for",
        "deep_backlog_ratio": "subscriber seconds per batch, "
        f"{r['scale']['deep_backlog']['deep']['backlog']:,}-pointer backlog / "
        f"{r['scale']['deep_backlog']['shallow']['backlog']}-pointer",
        "violations": "every turnstile contender and both latency runs: out of order, twice or not at all",
        "job_overhead_ratio": "job seconds / bare read-and-append seconds, same files, same session",
    }
    for name, t in r["targets"].items():
        rows.append(
            [
                f"`{name}`",
                values.get(name, f"{t['value']:g}"),
                t["target"],
                "met" if t["met"] else "**missed**",
                notes[name],
            ]
        )
    lat = r["single_batch_latency"]
    rows += [
        [
            "`single_batch_latency` median / p95",
            f"{lat['median_seconds']:.2f} s / {lat['p95_seconds']:.2f} s",
            "-",
            "-",
            f"`_SUCCESS` upload to its Iceberg commit, {lat['runs']} batches one after another on the warm "
            "local stack",
        ],
        [
            "`local_job_startup_seconds`",
            _f(r["local_job_startup_seconds"]),
            "-",
            "-",
            "one local one-batch job in the warm driver, submit to end, minus that batch's own seconds",
        ],
        [
            "`cold_job_startup_seconds`",
            _f(r["cold_job_startup_seconds"]),
            "-",
            "-",
            "(b)'s jobs, submit to end, minus their batch's own seconds: starting and stopping a Spark "
            "application",
        ],
    ]
    rows.append(
        [
            "`function_seconds_per_batch`",
            f"{r['function_seconds_per_batch']:.4f}",
            "-",
            "-",
            "(a), in process",
        ]
    )
    s3 = r["s3"]["coalesced_state_bucket"]["requests_by_operation_per_batch"]
    sizes = r["s3"]["batch_of_files"]
    many = max(sizes, key=int)
    rows.append(
        [
            "`s3_requests_per_batch`",
            f"{r['s3_requests_per_batch']:g}",
            "-",
            "-",
            "(a)'s workload through the Lambda handlers on moto S3 (versioned data bucket, STATE_BUCKET), "
            f"every API call counted; `HeadObject` {s3.get('HeadObject', 0):g} of them; one batch of "
            f"{int(many):,} files: {sum(sizes[many].values())} requests, {sizes[many].get('HeadObject', 0)} "
            f"`HeadObject` (one file: {sum(sizes['1'].values())}, {sizes['1'].get('HeadObject', 0)})",
        ]
    )
    return _table(["figure", "value", "target", "", "what"], rows) + "\n"


def _s3(r: dict[str, Any]) -> str:
    run, sizes = r["s3"]["coalesced_state_bucket"], r["s3"]["batch_of_files"]
    many = max(sizes, key=int)
    text = (
        "The workload of (a) once more, as AWS runs it (`turnstile_dev.bench.s3_requests`; alone: "
        "`python -m turnstile_dev.bench.s3_requests`): upstream's plain `PutObject` uploads (not "
        "counted) to a versioned data bucket of a moto server, turnstile's own objects in a state "
        "bucket, an S3 notification handed to `turnstile.entrypoints.lambda_entry` for each object the "
        "bucket's suffix filters select (docs/DEPLOY-AWS.md), jobs in process between notifications (the "
        "job's bucket side). Every S3 API call turnstile makes is counted at the boto3 client "
        f"(botocore's `before-call`): **{run['requests_per_batch']:g}** requests per batch, "
        f"{run['notifications_per_batch']:g} notifications per batch, {run['jobs']} jobs, applied in "
        f"order, each once: {run['applied_in_order_once']}.\n\n"
    )
    if apart := r["s3"].get("measured_apart"):
        text += (
            f"(Measured apart from the rest of this run, by the S3 part alone on {apart}, with the same "
            "workload; `make bench` measures it within its run.)\n\n"
        )
    rows = [[f"`{op}`", f"{n:g}"] for op, n in run["requests_by_operation_per_batch"].items()]
    text += _table(["S3 operation", "per batch"], rows) + "\n\n"
    ops = sorted({op for counts in sizes.values() for op in counts})
    text += (
        f"One ordered batch of one file against one of {int(many):,} files, each the first of its table "
        "(the levels of config above cached alike): a batch's data files are listed, 1,000 a page, "
        "never fetched or HEADed one by one; each `_SUCCESS` is stat'ed (`HeadObject`, and "
        "`ListObjectVersions` for its generation).\n\n"
    )
    text += (
        _table(
            ["S3 operation", *(f"{int(n):,} file(s)" for n in sorted(sizes, key=int))],
            [[f"`{op}`", *(str(sizes[n].get(op, 0)) for n in sorted(sizes, key=int))] for op in ops]
            + [["total", *(str(sum(sizes[n].values())) for n in sorted(sizes, key=int))]],
        )
        + "\n"
    )
    return text


def _contenders(r: dict[str, Any]) -> str:
    rows = []
    for key, label in LABELS.items():
        c, v = r["contenders"][key], r["violations"][key]
        rows.append(
            [
                label,
                str(c["batches"]),
                _f(c["wall_seconds"], 1),
                _f(c["seconds_per_batch"], 3),
                _f(c["rows_per_second"], 0),
                str(c.get("turnstile_jobs", "-")),
                str(c["spark_applications"]),
                str(c["commits"]),
                f"{v['out_of_order']} / {v['twice']} / {v['missing']} / {v['split']}",
            ]
        )
    text = _table(
        [
            "contender",
            "batches",
            "wall s",
            "s per batch",
            "rows/s",
            "turnstile jobs",
            "Spark applications",
            "commits",
            "out of order / twice / missing / split",
        ],
        rows,
    )
    c = r["contenders"]
    sss = c["structured_streaming"]
    short = {k: LABELS[k].split(" ", 1)[0] for k in TURNSTILE}

    def each(what: Callable[[str], str]) -> str:
        return ", ".join(f"{short[k]} {what(k)}" for k in TURNSTILE)

    def jobs(k: str) -> str:
        run = c[k]["run"]
        mean = sum(run["job_seconds"]) / max(len(run["job_seconds"]), 1)
        return (
            f"{run['jobs']} jobs, {mean:.1f} s each on average (submit to end), their batches "
            f"{run['batch_seconds_in_jobs']:g} s in all"
        )

    tags = each(lambda k: str(r["violations"][k]["from_turnstile_rel"]["total"]))
    cpu = each(lambda k: f"{c[k]['cpu_seconds_per_batch']:g}")
    events = each(lambda k: f"{c[k]['run']['events_delivered'] / c[k]['batches']:.2f}")
    text += f"""

- Spark applications: (a) and (b') ran in one warm driver (started by (a)'s first job; (b') started
  none); each job of (e) and (b) was a Spark application of its own.
- Two changes at once, not a headline: (b), one job per batch in cold applications, against (a),
  coalescing in the warm driver, is {r["warm_coalescing_vs_cold_one_job_per_batch"]:.1f}x; it multiplies
  what coalescing saves by what a warm driver saves.
- From `turnstile.rel` tags: {tags} violations.
- (c) commit order of its first table's first micro-batches (batch numbers):
  {sss["applied_order_sample"]}: the file source takes files by modification time, so batches
  land in arrival order, and nothing waits for a `_SUCCESS`.
- (a) jobs: seconds each (submit to end) {c["coalesced"]["run"]["job_seconds"]}. Jobs: {each(jobs)}.
  Machine CPU-seconds per batch: {cpu}.
- Events the stack's bridge delivered per batch: {events} (the bridge sees listings, so it
  misses generations rewritten within a poll; the exact counts are below).
"""
    return text


def _counting(r: dict[str, Any]) -> str:
    a, b = r["counting"]["coalesced"], r["counting"]["one_job_per_batch"]
    s = r["counting"]["coalesced_state_bucket"]
    text = (
        "With a state bucket (STATE_BUCKET, Terraform's `separate_state_bucket`), the same run of (a) "
        "keeps turnstile's own objects in a bucket no trigger watches (docs/DEPLOY.md, State bucket): "
        f"**{s['invocations_per_batch']:g}** invocations per batch, "
        f"**{s['invocations_per_batch_without_data_files']:g}** without upstream's data files, "
        f"{s['storage_ops_per_batch']:g} storage operations per batch, applied in order, each once: "
        f"{s['applied_in_order_once']}. By kind: "
        + ", ".join(f"{k} {v:g}" for k, v in s["invocations_by_kind_per_batch"].items())
        + ". The rest of this section is the one-bucket layout (turnstile's objects beside the data).\n\n"
    )
    rows = [
        ["jobs", str(a["jobs"]), str(b["jobs"])],
        [
            "function invocations per batch (every event)",
            f"{a['invocations_per_batch']:g}",
            f"{b['invocations_per_batch']:g}",
        ],
        [
            "  of which make a storage call (the rest return before any)",
            f"{a['acting_invocations_per_batch']:g}",
            f"{b['acting_invocations_per_batch']:g}",
        ],
        [
            "  not counting upstream's data files",
            f"{a['invocations_per_batch_without_data_files']:g}",
            f"{b['invocations_per_batch_without_data_files']:g}",
        ],
        [
            "function-seconds per batch",
            f"{a['function_seconds_per_batch']:.4f}",
            f"{b['function_seconds_per_batch']:.4f}",
        ],
        [
            "storage operations per batch: functions",
            f"{a['function_ops_per_batch']:g}",
            f"{b['function_ops_per_batch']:g}",
        ],
        [
            "storage operations per batch: job (bucket side)",
            f"{a['job_ops_per_batch']:g}",
            f"{b['job_ops_per_batch']:g}",
        ],
        [
            "storage operations per batch: total",
            f"**{a['storage_ops_per_batch']:g}**",
            f"{b['storage_ops_per_batch']:g}",
        ],
        [
            "  failed preconditions (each one more read on GCS)",
            f"{a['conflicts_per_batch']:g}",
            f"{b['conflicts_per_batch']:g}",
        ],
        [
            "upstream's own writes per batch (not counted above)",
            f"{a['upstream_ops_per_batch']:g}",
            f"{b['upstream_ops_per_batch']:g}",
        ],
        ["applied in order, each once", str(a["applied_in_order_once"]), str(b["applied_in_order_once"])],
    ]
    text += _table(["per batch", "(a) coalescing", "(b), (b') one job per batch"], rows) + "\n\n"
    kinds = sorted(set(a["invocations_by_kind_per_batch"]) | set(b["invocations_by_kind_per_batch"]))
    text += "Invocations per batch by the kind of object whose event it is:\n\n"
    text += _table(
        ["object", "(a)", "(b), (b')", "(a) function-seconds"],
        [
            [
                k,
                f"{a['invocations_by_kind_per_batch'].get(k, 0):g}",
                f"{b['invocations_by_kind_per_batch'].get(k, 0):g}",
                f"{a['function_seconds_by_kind_per_batch'].get(k, 0):.4f}",
            ]
            for k in kinds
        ],
    )
    text += "\n\n(a) storage operations per batch by operation kind:\n\n"
    text += _table(
        ["operation", "per batch"],
        [[k, f"{v:g}"] for k, v in a["function_ops_by_operation_per_batch"].items()],
    )
    text += "\n\n(a) by the event being handled:\n\n"
    text += _table(
        ["event", "per batch"], [[k, f"{v:g}"] for k, v in a["function_ops_by_event_per_batch"].items()]
    )
    text += "\n\n(a) by call site and operation (functions), then the job:\n\n"
    rows = [[f"`{k}`", f"{v:g}"] for k, v in a["function_ops_by_site_and_operation_per_batch"].items()]
    rows += [[f"job: `{k}`", f"{v:g}"] for k, v in a["job_ops_by_site_per_batch"].items()]
    text += _table(["call site", "per batch"], rows)
    if a["conflicts_by_site_per_batch"]:
        text += "\n\nFailed preconditions by call site (a):\n\n"
        text += _table(
            ["call site", "per batch"],
            [[f"`{k}`", f"{v:g}"] for k, v in a["conflicts_by_site_per_batch"].items()],
        )
    return text + "\n"


def _scale(r: dict[str, Any]) -> str:
    deep, many = r["scale"]["deep_backlog"], r["scale"]["many_tables"]
    one, lots = many["one_table"], many["many_tables"]
    repeats = len(deep["deep"]["seconds_per_batch_runs"])
    backlog = _table(
        ["backlog", "batches applied", "function-seconds per batch", "storage operations per batch"],
        [
            [
                f"{deep[k]['backlog']:,} pointers",
                str(deep[k]["applied"]),
                f"{deep[k]['seconds_per_batch']:.5f}",
                f"{deep[k]['function_ops_per_batch']:g}",
            ]
            for k in ("shallow", "deep")
        ],
    )
    tables = _table(
        ["tables", "batches", "seconds", "batches/s", "function-seconds per batch", "in order, once"],
        [
            [
                str(x["tables"]),
                str(x["batches"]),
                f"{x['seconds']:.2f}",
                f"{x['batches_per_second']:.1f}",
                f"{x['function_seconds_per_batch']:.4f}",
                str(x["applied_in_order_once"]),
            ]
            for x in (one, lots)
        ],
    )
    return f"""{backlog}

`deep_backlog_ratio` = {deep["deep_backlog_ratio"]:.3f} (medians of {repeats} alternating runs each;
runs: shallow {_runs(deep["shallow"])}, deep {_runs(deep["deep"])} ms per batch). Both keep the subscriber
busy the same way, jobs of 10 noticed through their done signals; the shallow backlog is topped up
while each job runs. The subscriber lists at most 100 pointers per turn and the listings of a job's
range are bounded by that range, so the backlog's depth does not show. Measured over the in-memory
store, whose listings stop at their limit as GCS's do (fake-gcs-server's listing time grows with
the objects under the prefix, limit or not: it would measure the emulator), with the garbage
collector kept off the in-memory bucket's objects while timing (a real bucket is not in the
function's heap).

{tables}

Protocol only (jobs in process), over fake-gcs-server, events delivered by four concurrent senders
like the local bridge's: throughput with {lots["tables"]} tables is {many["throughput_ratio"]:.2f}x
that of one table, function-seconds per batch {many["function_seconds_ratio"]:.2f}x. All invocations
share one Python process here (one interpreter lock), so the four senders overlap only their
storage waits; with one table they mostly wait on each other, the table's lock serialising its
jobs. In the cloud every invocation is its own instance and tables share no state object, so
tables add throughput; a real-stack run with 20 tables (20 concurrent spark-submits on 2 cores)
does not fit here.
"""


def _runs(found: dict[str, Any]) -> str:
    return ", ".join(f"{x * 1000:.3f}" for x in found["seconds_per_batch_runs"])


def _job_cost(r: dict[str, Any]) -> str:
    j, s = r["job_cost"], r["startup"]
    steps = "\n".join(
        f"  - {name}: {seconds / j['batches']:.3f} s per batch"
        for name, seconds in j["job_steps_seconds"].items()
    )
    bare = sum(j["bare_seconds"]) / j["batches"]
    spark_jobs = j.get("spark_jobs_per_batch", {})
    return f"""Over {j["batches"]} batches of {j["rows_per_batch"]:,} rows, in one warm session, alternating
which goes first: the job applies {j["job_rows_per_second"]:,.0f} rows/s, a bare
`spark.read.csv(...).writeTo(t).append()` of the same files {j["bare_rows_per_second"]:,.0f} rows/s:
`job_overhead_ratio` = **{r["job_overhead_ratio"]:.2f}** (target 1.3). Per batch the bare append takes
{bare:.3f} s in {spark_jobs.get("bare", 0):g} Spark job(s), the job {spark_jobs.get("job", 0):g} Spark
jobs; the job's time by step:

{steps}

Start-up of one local job: {s["source"]}, submit to end {", ".join(f"{x:.2f}" for x in s["runs_seconds"])} s;
the same batch applied in the warm session, creating its table: {s["warm_first_batch_seconds"]:.2f} s.
`local_job_startup_seconds` = **{r["local_job_startup_seconds"]:.2f}** (the median run's submit to end
minus the batch's own seconds inside that job, from its result record): the
local runner hands the job to its warm driver (one spark-submit per stack that runs jobs one after
another, `turnstile.spark.warm`), so a job no longer pays a JVM, the Spark session and the Iceberg
catalog; the first job of (a) paid them once. A job in a Spark application of its own
(`LOCAL_DRIVER=cold`, the jobs of (b)) pays them every time:
`cold_job_startup_seconds` = **{r["cold_job_startup_seconds"]:.2f}** (their submit-to-end seconds minus
their batches' own seconds, averaged over {r["contenders"]["one_job_per_batch"]["turnstile_jobs"]} jobs
of one batch each). Dataproc Serverless takes 40-60 s for the same.
"""


def _formula(r: dict[str, Any]) -> str:
    f, by_kind = r["ops_formula"], r["ops_formula_by_kind"]
    k1, k2 = f["k_measured"]
    rows = [[kind, f"{v['a']:g}", f"{v['b']:g}"] for kind, v in by_kind.items() if v["a"] or v["b"]]
    return (
        f"From the two in-process runs (one job per batch, K = {k1:g}; coalescing, K = {k2:g} batches per "
        f"job on average), storage operations per batch follow **ops(K) = {f['a']:g} + {f['b']:g}/K**: "
        f"{f['a']:g} per batch whatever the job size, {f['b']:g} per job shared by its K batches. By kind "
        "(who, operation), the same two points:\n\n"
        + _table(["kind", "a (per batch)", "b (per job)"], rows)
        + "\n"
    )


def _dataproc(r: dict[str, Any]) -> str:
    d = r["dataproc_cost_model"]
    a = d["assumptions"]
    rows = []
    for row in d["rows"]:
        time_key = "drain_minutes" if "drain_minutes_low" in row else "latency_seconds"
        unit = "min to drain" if time_key == "drain_minutes" else "s latency"
        rows.append(
            [
                row["scenario"],
                str(row["batches_per_job"]),
                f"{row['dcu_seconds_per_batch_low']:g} - {row['dcu_seconds_per_batch_high']:g}",
                f"{row['job_starts_per_batch']:g}",
                f"{row[time_key + '_low']:g} - {row[time_key + '_high']:g} {unit}",
            ]
        )
    return (
        f"Computed, not measured on Dataproc: the measured in-job time per batch of (a), "
        f"{d['batch_seconds']:.3f} s ({a['batch_seconds']}), plus the documented start-up of "
        f"{a['startup_seconds'][0]:g}-{a['startup_seconds'][1]:g} s per job; {a['billing']}; one-minute "
        f"minimum billing ({a['minimum_billed_seconds']:g} s) at {a['dcu_per_job']} DCU; the CreateBatch "
        f"quota is {a['create_batch_quota_per_minute']} per minute (the trickle's "
        f"{d['rows'][-1]['create_batch_per_minute']:g} per minute is far below it; a 100-batch backlog "
        "starts its jobs one after another, never near it). Ranges are low and high start-up.\n\n"
        + _table(
            ["scenario", "batches per job", "DCU-seconds per batch", "job starts per batch", "time"], rows
        )
        + "\n\nA trickle pays the minimum billing for every batch: its cost is start-up, not work; "
        "coalescing only helps when batches wait.\n"
    )


def _driver_policy(r: dict[str, Any]) -> str:
    found = r.get("driver_policy_replay")
    if not found:
        return "Not computed in this run.\n"
    return (
        "Computed, not measured on Dataproc (docs/DRIVER.md): drivers run by the library's policy "
        "(`turnstile.jobs.driver_policy`) on seeded 24-hour traces, each request taking the in-job time "
        f"per batch above ({r['dataproc_cost_model']['batch_seconds']:.3f} s), billed as the cost model "
        "bills; the offline optimum is the least any one-driver-at-a-time policy that holds no request "
        "back spends on the same trace.\n\n" + policy_replay.markdown(found)
    )


def _metadata(r: dict[str, Any]) -> str:
    m = r.get("metadata_growth")
    if not m:
        return "Not measured in this run.\n"
    props = ", ".join(f"`{k}={v}`" for k, v in m["properties"].items())
    return (
        f"One table created as the job creates one ({props}), then {m['commits']:,} commits (the "
        "same data file appended again through Iceberg's API, each commit tagged as the job tags its "
        f"own; {m['commit_seconds']:.3f} s per commit): the current metadata.json is "
        f"**{m['metadata_json_bytes']:,} bytes** ({m['metadata_json_bytes_per_commit']:g} bytes per commit: "
        f"the snapshot log, which only snapshot expiry shortens), and the metadata folder keeps "
        f"{m['metadata_json_files_kept']} metadata.json files ({m['metadata_json_files_bytes']:,} bytes) "
        f"instead of one per commit. Snapshots: {m['snapshots']:,} (docs/PROTOCOL.md says how to expire "
        "them safely).\n"
    )
