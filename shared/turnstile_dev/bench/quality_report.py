"""results.md's sections on expectations and audits: their per-batch cost in the job, and the audit
branch's snapshots before and after expiry (`quality_cost`)."""

from __future__ import annotations

from typing import Any


def _when(m: dict[str, Any]) -> str:
    if "measured_at" in m:
        when = m["measured_at"]
        return (
            f"Measured in a separate run on {when}, not in the same run as the rest of this page (nor in "
            "its list of missed targets). "
        )
    return ""


def cost(r: dict[str, Any]) -> str:
    q = r.get("quality_cost")
    if not q:
        return "Not measured in this run.\n"
    checks = ", ".join(f"`{e['check']}` ({e['on_fail']})" for e in q["expectations"])
    audits = ", ".join(f"`{a['sql']}`" for a in q["audits"])
    verdict = "met" if q["met"] else "not met"
    batch, least = q.get("batch_audit"), q.get("least_audit")
    tables = "four tables" if least else "three tables" if batch else "two tables"
    text = (
        f"{_when(q)}In one warm Spark session, batch by batch and taking turns at going first, the same "
        f"{q['batches']} batches ({q['rows_per_batch']:,} rows each) are applied by the job "
        f"(`execution.execute` with `IcebergApplier`) to {tables} in separate namespaces: one whose "
        f"load.json has two expectations ({checks}) and one audit ({audits}, so each batch is committed "
        "to the audit branch, audited, then published to main), "
    )
    if batch:
        text += (
            f"one with the same expectations and the audit over the batch's rows alone "
            f"(`{batch['audits'][0]['sql']}`), "
        )
    if least:
        text += (
            "one with the least audit-before-publish there is (no expectation, one audit that filters "
            f"the batch's rows: `{least['audits'][0]['sql']}`, which returns no row here), "
        )
    text += (
        "one without. Median in-job seconds per batch, whole-table audit: "
        f"**{q['checked_median_seconds']:.2f} s** with them, **{q['plain_median_seconds']:.2f} s** "
        f"without: **{q['ratio']:.2f}x** (target <= {q['target_ratio']}x: {verdict}).{_where(q)}"
    )
    if batch:
        batch_verdict = "met" if batch["met"] else "not met"
        text += (
            f" Audit over `${{batch}}`: **{batch['checked_median_seconds']:.2f} s** per batch, "
            f"**{batch['ratio']:.2f}x** (target: {batch_verdict}).{_where(batch, kind='batch')}"
        )
    if least:
        least_verdict = "met" if least["met"] else "not met"
        text += (
            f" The least audit-before-publish: **{least['checked_median_seconds']:.2f} s** per batch, "
            f"**{least['ratio']:.2f}x** (target: {least_verdict}).{_where(least, kind='least')}"
        )
    return text + "\n"


def _where(q: dict[str, Any], *, kind: str = "whole") -> str:
    """Spark jobs per batch and the checked batch's steps, when the run measured them."""
    jobs, steps = q.get("spark_jobs_per_batch"), q.get("checked_step_seconds_per_batch")
    if not jobs or not steps:
        return ""
    timed = "; ".join(f"{label} {seconds:.2f} s" for label, seconds in steps.items())
    text = (
        f" Spark jobs per batch: {jobs['checked']:.1f} with them, {jobs['plain']:.1f} without. Where a "
        f"checked batch's time goes (mean seconds per batch, each step with what it calls): {timed}; "
        "the rest is what the plain batch does too (read, write, result record)."
    )
    audit = steps.get("the audit's query")
    if q["met"] or audit is None:
        return text
    share = audit / q["plain_median_seconds"]
    if kind == "least":
        return text + (
            f" Its one query, a filter that returns nothing, takes {audit:.2f} s ({share:.2f}x the plain "
            "batch): a Spark job of its own (planning, one task per data file, the result collected), "
            "which no audit can skip, since it reads the snapshot the batch's commit made. Together with "
            "the branch commit and the fast-forward of main, that is already "
            f"{q['ratio']:.2f}x: on batches of this size no audit run against the staged commit meets "
            f"the {q['target_ratio']}x target, however the rest is arranged."
        )
    if kind == "whole":
        return text + (
            f" What stays above the plain batch: the audit's query alone takes {audit:.2f} s, "
            f"{audit / q['plain_median_seconds']:.1f}x the plain batch: it reads the whole table as of "
            "the staged snapshot (every data file, a shuffle), so it grows with the table, not the "
            "batch; a `drop` expectation needs its one pass over the batch's rows before the commit, so the "
            "rows it sets aside are written before the batch is (the retry of a job that died after its "
            "commit skips the batch); the branch commit and the fast-forward of main are one metadata commit "
            "each."
        )
    return text + (
        f" Its audit's query reads only the batch's own data files, yet takes {audit:.2f} s, "
        f"{share:.1f}x the plain batch where the target leaves {q['target_ratio'] - 1:.1f}x for "
        "everything checked: a GROUP BY is two Spark jobs with a shuffle between them, a fixed cost "
        "that on batches this small is about what the batch's whole write costs."
    )


def _refs(state: dict[str, Any]) -> str:
    parts = []
    for name, ref in state["refs"].items():
        age = ref["max_ref_age_ms"]
        keep = ref["min_snapshots_to_keep"]
        parts.append(
            f"`{name}` ({ref['type']}; max ref age {'none' if age is None else f'{age} ms'}, "
            f"min snapshots to keep {'table default' if keep is None else keep})"
        )
    return ", ".join(parts)


def growth(r: dict[str, Any]) -> str:
    g = r.get("audit_branch_growth")
    if not g:
        return "Not measured in this run.\n"
    before, after = g["before"], g["after"]
    pinned = after["snapshots_only_branches_reach"]
    pins = (
        "The audit branch pins no snapshot: after each publish it points at main's head, so it reaches "
        "only main's own history, and expiry keeps the same snapshots it would without it."
        if pinned == 0
        else f"The audit branch keeps {pinned} snapshot(s) alive that main does not reach: a staged "
        "batch not yet published (or one main moved away from), held until the next batch resets "
        "the branch to main."
    )
    return (
        f"{_when(g)}The audited table above after {g['batches_committed']} batches (the warm-up and the "
        "measured ones, each committed to the audit branch, then published), then the job's snapshot "
        "expiry (`hygiene.expire`, as after a job) with `snapshot_retention_days=0` and "
        f"`snapshot_retention_min={g['retain_last']}`. "
        f"Snapshots: **{before['snapshots']} before, {after['snapshots']} after** ({g['expired']} "
        f"expired from main's history, {before['main_history']} -> {after['main_history']}). Refs: "
        f"{_refs(after)}. {pins} Snapshots no ref reaches after expiry: "
        f"{after['snapshots_no_ref_reaches']}.\n"
    )
