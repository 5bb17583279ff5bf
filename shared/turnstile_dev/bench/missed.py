"""results.md's "What missed its target, and why": for each target missed in this run, where the
time or the operations went, from this run's own figures (nothing here is a constant claim)."""

from __future__ import annotations

from typing import Any

from turnstile.jobs.local_spark import CORES
from turnstile_dev.bench.labels import LABELS, TURNSTILE


def _per_batch_inside(run: dict[str, Any], batches: int) -> float:
    return float(run["batch_seconds_in_jobs"]) / max(batches, 1)


def _ratio(r: dict[str, Any], key: str, other: str) -> str:
    t, c = r["targets"][key], r["contenders"]
    a = c["coalesced"]
    run = a["run"]
    inside = float(run["batch_seconds_in_jobs"])
    a_in = _per_batch_inside(run, a["batches"])
    bare = sum(r["job_cost"]["bare_seconds"]) / max(r["job_cost"]["batches"], 1)
    rest = max(a["wall_seconds"] - inside, 0.0)
    name = LABELS[other].split(" ", 1)[0]
    tables = r["workload"]["tables"]
    serial = (
        f" The warm driver runs the {tables} tables' jobs side by side on local Spark's {CORES} cores, "
        f"each job its own session and commits, where {name} applies its tables in one query each."
        if tables > 1
        else ""
    )
    return (
        f"- **{key} {t['value']:g} (target {t['target']}).** (a) spends {a['seconds_per_batch']:.3f} s per "
        f"batch against {c[other]['seconds_per_batch']:.3f} s for {LABELS[other]}. Of (a)'s "
        f"{a['wall_seconds']:.1f} s, its {a['turnstile_jobs']} jobs spent {inside:.1f} s applying batches "
        f"({a_in:.3f} s per batch, {inside / max(a['wall_seconds'], 1e-9):.0%} of the wall time), and a "
        f"batch inside the job costs {r['job_overhead_ratio']:.2f}x a bare append ({bare:.3f} s in one warm "
        f"session, see `job_overhead_ratio`).{serial} In the other {rest:.1f} s no batch was being applied: "
        f"the first job was submitted {run['first_submit_seconds']:.1f} s after the gates opened and "
        "started the warm driver (a JVM, pyspark and a session, about `cold_job_startup_seconds` = "
        f"{r['cold_job_startup_seconds']:.1f} s here, paid once by (a) as by {name}), and each job's end "
        "has to reach the subscriber before the table's next job is submitted (below)."
    )


SPOOL_TARGETS = (
    "ratio_vs_structured_streaming_spool",
    "ratio_vs_floor_spool",
    "single_batch_latency_spool_median",
    "single_batch_latency_spool_p95",
)


def _spool(r: dict[str, Any]) -> str:
    """The figures through the bucket's spool that missed, against the same workload in the local
    folder spool's warm driver: what the spool path adds, the driver's start-up first."""
    t, c = r["targets"], r["contenders"]
    a, spooled, sss = c["coalesced"], c["coalesced_spool"], c["structured_streaming"]
    missed_ = ", ".join(
        f"{k} {t[k]['value']:g} (target {t[k]['target']})" for k in SPOOL_TARGETS if not t[k]["met"]
    )
    run = spooled["run"]
    inside = _per_batch_inside(run, spooled["batches"])
    lat, lat_spool = r["single_batch_latency"], r["single_batch_latency_spool"]
    a_in = _per_batch_inside(a["run"], a["batches"])
    first = run.get("first_start_seconds")
    start_up = ""
    if first is not None:
        rest = spooled["seconds_per_batch"] - first / spooled["batches"]
        start_up = (
            f" Its first job started {first:.1f} s after the gates opened: the function's submit, then the "
            f"launch and start-up of a driver (a spark-submit), which (a)'s driver had paid before its "
            f"clock started and (c) pays from spark-submit's start ({sss['session_start_seconds']:.1f} s "
            f"to its session). From that start on, (s) took {rest:.3f} s per batch, "
            f"{rest / sss['seconds_per_batch']:.2f}x (c)'s figure (arithmetic on the measured run, not a "
            "measurement of a driver already up)."
        )
    return (
        f"- **Through the bucket's spool: {missed_}.** (s), (a) through the spool, spends "
        f"{spooled['seconds_per_batch']:.3f} s per batch, (a) in the local folder spool's one driver "
        f"{a['seconds_per_batch']:.3f} s. (s)'s {spooled['turnstile_jobs']} jobs were served by "
        f"{spooled['spark_applications']} driver(s) it launched, {CORES} jobs side by side as in (a); a "
        f"batch took {inside:.3f} s inside its job against {a_in:.3f} s in (a).{start_up} A single "
        "batch takes "
        f"{lat_spool['median_seconds']:.2f} s (median) through the spool against "
        f"{lat['median_seconds']:.2f} s: each job waits for the driver's next listing of the spool "
        f"(every {r['settings'].get('spool_poll_seconds', '-')} s here) and pays the spool's storage "
        "operations (its section above) on fake-gcs-server."
    )


def _storage_ops(r: dict[str, Any]) -> str:
    count = r["counting"]["coalesced"]
    sites = count["function_ops_by_site_and_operation_per_batch"]
    top = ", ".join(f"`{k}` {v:g}" for k, v in list(sites.items())[:5])
    kinds = ", ".join(f"{k} {v:g}" for k, v in count["function_ops_by_operation_per_batch"].items())
    f = r["ops_formula"]
    return (
        f"- **storage_ops_per_batch {count['storage_ops_per_batch']:g} (target 6).** The functions make "
        f"{count['function_ops_per_batch']:g} per batch ({kinds}), the job {count['job_ops_per_batch']:g}. "
        f"Largest call sites: {top}. Per job, {f['b']:g} operations are shared by its batches "
        f"(ops(K) = {f['a']:g} + {f['b']:g}/K), so the per-batch part, {f['a']:g}, is what remains at any "
        "job size."
    )


def _invocations(r: dict[str, Any]) -> str:
    t, bare = r["targets"]["invocations_per_batch"], r["targets"]["invocations_per_batch_without_data_files"]
    kinds = r["counting"]["coalesced_state_bucket"]["invocations_by_kind_per_batch"]
    own = {k: v for k, v in kinds.items() if k not in ("data", "success", "config", "gate")}
    setup = kinds.get("config", 0) + kinds.get("gate", 0)
    return (
        f"- **invocations_per_batch {t['value']:g} (target {t['target']}), without the data files "
        f"{bare['value']:g} (target {bare['target']}).** Every finalized object is an invocation "
        f"(Eventarc cannot filter a bucket's events by name): {kinds.get('data', 0):g} per batch are "
        f"upstream's data files ({r['workload']['files']} per batch), {kinds.get('success', 0):g} its "
        "`_SUCCESS`, and "
        + ", ".join(f"{v:g} {k}" for k, v in own.items())
        + f" are turnstile's own objects; {setup:g} are the configuration and gate files. "
        f"{r['acting_invocations_per_batch']:g} per batch make any storage call, the rest return at once "
        "(these are the figures with a state bucket, STATE_BUCKET)."
    )


def _overhead(r: dict[str, Any]) -> str:
    j = r["job_cost"]
    detail = ", ".join(f"{k} {v / j['batches']:.3f} s" for k, v in j["job_steps_seconds"].items())
    jobs = j.get("spark_jobs_per_batch", {})
    job_total = sum(j["job_seconds"]) / j["batches"]
    bare = sum(j["bare_seconds"]) / j["batches"]
    return (
        f"- **job_overhead_ratio {r['job_overhead_ratio']:.2f} (target 1.3).** Per batch of "
        f"{j['rows_per_batch']:,} rows the job takes {job_total:.3f} s in {jobs.get('job', 0):g} Spark jobs, "
        f"the bare append {bare:.3f} s in {jobs.get('bare', 0):g}; the job's time by step: {detail}. On "
        "batches this small each Spark job is mostly fixed planning and scheduling cost, so every pass "
        "beyond the append shows."
    )


def _job_ends(r: dict[str, Any]) -> str:
    """How each job's end reached the subscriber: its done signal, or only the sweeper."""
    runs = [r["contenders"][k]["run"] for k in TURNSTILE]
    restarts = sum(run["sweeper_restarts"] for run in runs)
    jobs = sum(run["jobs"] for run in runs)
    gaps = [g for run in runs for g in run["notice_gaps_seconds"]]
    sweep = r["settings"]["sweep_every_seconds"]
    gap_text = (
        f"the next job of a table was submitted {sum(gaps) / len(gaps):.2f} s after the previous job's "
        f"end was recorded, on average (longest {max(gaps):.2f} s; negative: submitted on the done "
        "signal, before the end was recorded)"
        if gaps
        else "no table ran two jobs in a row, so no gap between jobs was measured"
    )
    text = (
        "\n### Between jobs: how a job's end reaches the subscriber\n\n"
        f"In (a), (b'), (e) and (b), the sweeper (every {sweep:g} s) had to restart {restarts} subscriber "
        f"run(s) for {jobs} jobs; {gap_text}.\n"
    )
    if restarts * 2 >= jobs:
        return text + (
            "\n**Finding:** most jobs' ends reached the subscriber only through the sweeper, so those "
            "tables waited up to a sweep period between jobs.\n"
        )
    return text + "\nJobs' ends were noticed through their done signals, not the sweeper.\n"


def section(r: dict[str, Any]) -> str:
    t = r["targets"]
    out: list[str] = []
    for key, other in (
        ("ratio_vs_structured_streaming", "structured_streaming"),
        ("ratio_vs_floor", "floor"),
    ):
        if not t[key]["met"]:
            out.append(_ratio(r, key, other))
    if not all(t[k]["met"] for k in SPOOL_TARGETS if k in t):
        out.append(_spool(r))
    if not t["storage_ops_per_batch"]["met"]:
        out.append(_storage_ops(r))
    if not (t["invocations_per_batch"]["met"] and t["invocations_per_batch_without_data_files"]["met"]):
        out.append(_invocations(r))
    if not t["deep_backlog_ratio"]["met"]:
        out.append(
            f"- **deep_backlog_ratio {t['deep_backlog_ratio']['value']:g} (target 1.2).** See the runs in "
            "the Scale section: the storage operations per batch at both depths are there too."
        )
    if not t["violations"]["met"]:
        out.append(f"- **violations {t['violations']['value']:g} (target 0).** See the contenders' table.")
    if not t["job_overhead_ratio"]["met"]:
        out.append(_overhead(r))
    if not out:
        out.append("Every target was met.")
    out.append(_job_ends(r))
    return "\n".join(out) + "\n"
