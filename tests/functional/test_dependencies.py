"""Tables that wait for other tables: watermarks, dependencies with offsets, derived steps.

Real CloudEvents through functions/main.py on fake-gcs-server (harness.py) and the in-process
runner: sources arrive out of step, the dependent waits with its reason, and catches up in order,
each batch exactly once, woken only through the bucket.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.functional.harness import Host
from tests.functional.scenario import invocation
from turnstile.names.paths import Table
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops import status as status_ops
from turnstile.ops.errors import Refused
from turnstile.protocol import lineage, operator, sweeper
from turnstile.protocol.state import TableState
from turnstile.state.records import LockState, Manifest, Watermark

HOURLY = {"natural_time": "hourly"}


class FixedClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def configure(host: Host, table: str, load: dict[str, object], *, ordered: bool = True) -> None:
    host.upload(f"{table}/_config/load.json", json.dumps(load).encode())
    if ordered:
        host.upload(f"{table}/_config/ORDERME")


def hour(table: str, h: int) -> str:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h)
    return f"{table}/{at:%Y/%m/%d/%H}"


def rel(h: int) -> str:
    return f"{datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h):%Y/%m/%d/%H}"


def arrive(host: Host, table: str, *hours: int) -> None:
    for h in hours:
        host.put_batch(hour(table, h))
    host.drain()


def watermark(host: Host, table: str) -> datetime | None:
    found = host.store.inner.read(f"{table}/_turnstile/watermark.json")
    return None if found is None else Watermark.decode(found.data, table).watermark


def waiting_for(host: Host, table: str) -> tuple[str, ...]:
    state = TableState(invocation(host), Table(host.bucket, table, *table.split("/")))
    return state.view().waiting_for


def step_manifests(host: Host) -> list[Manifest]:
    return [
        Manifest.decode(host.store.inner.read(o.name).data, o.name)  # type: ignore[union-attr]
        for o in host.store.inner.list_objects("ds/fact/_turnstile/jobs/")
        if o.name.endswith(".manifest.json")
    ]


def test_a_dependent_waits_for_both_sources_and_catches_up_in_order_exactly_once(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(host, "ds/b", HOURLY)
    configure(host, "ds/fact", HOURLY | {"depends_on": ["ds.a", {"table": "ds.b", "offset": "-1h"}]})
    arrive(host, "ds/fact", 0, 1, 2)
    assert host.applied("ds/fact") == []
    assert host.backlog("ds/fact") == [rel(0), rel(1), rel(2)]
    reasons = waiting_for(host, "ds/fact")
    assert any("ds/a to reach 2026-01-01T01:00:00+00:00 (its watermark: none yet)" in r for r in reasons)
    assert any("ds/b to reach 2026-01-01T00:00:00+00:00" in r for r in reasons)
    assert host.store.inner.stat("ds/fact/_BACKFILL") is None  # waiting, no run scheduled
    shown = status_ops.table_status(invocation(host), Table(host.bucket, "ds/fact", "ds", "fact")).to_json()
    assert (shown["health"], shown["backlog_head"], shown["watermark"]) == ("WAITING", rel(0), None)
    assert tuple(shown["waiting_for"]) == reasons
    # Every waiting batch says what it waits for: its own sources' hours, and the batches before it.
    waiting = {r: tuple(why) for r, why in shown["waiting_batches"].items()}
    assert list(waiting) == [rel(0), rel(1), rel(2)]
    assert waiting[rel(0)] == reasons
    assert waiting[rel(2)] == (
        "ds/a to reach 2026-01-01T03:00:00+00:00 (its watermark: none yet)",
        "ds/b to reach 2026-01-01T02:00:00+00:00 (its watermark: none yet)",
        "the batches queued before it (order)",
    )

    arrive(host, "ds/a", 0, 1, 2)  # a is ahead; b (one hour behind allowed) has nothing yet
    assert watermark(host, "ds/a") == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert host.applied("ds/fact") == []
    assert waiting_for(host, "ds/fact") == (
        "ds/b to reach 2026-01-01T00:00:00+00:00 (its watermark: none yet)",
    )

    arrive(host, "ds/b", -1)  # b's watermark 00:00: fact hour 00 (offset -1h) may go
    assert host.applied("ds/fact") == [rel(0)]
    arrive(host, "ds/b", 0, 1)
    assert host.applied("ds/fact") == [rel(0), rel(1), rel(2)]
    assert watermark(host, "ds/fact") == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert host.backlog("ds/fact") == []
    shown = status_ops.table_status(invocation(host), Table(host.bucket, "ds/fact", "ds", "fact")).to_json()
    assert (shown["health"], shown["watermark"], shown["waiting_for"]) == (
        "IDLE",
        watermark(host, "ds/fact"),
        (),
    )
    lag = (datetime.now(UTC) - datetime(2026, 1, 1, 3, tzinfo=UTC)).total_seconds()
    assert abs(shown["watermark_lag_seconds"] - lag) < 60
    assert [r for r, _ in host.tables.commits["ds/fact"]] == [rel(0), rel(1), rel(2)]


def test_a_derived_table_builds_one_step_per_hour_its_sources_completed(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(host, "ds/b", HOURLY)
    start = "2026-01-01T00:00:00Z"
    configure(
        host,
        "ds/fact",
        {"derived": {"step": "1h", "start": start, "maxstep": "2h"}, "depends_on": ["ds.a", "ds.b"]},
        ordered=False,
    )
    report = sweeper.sweep(invocation(host))  # registers the derived table with its sources
    assert {r["table"]: r.get("steps_published") for r in report}[f"gs://{host.bucket}/ds/fact"] == 0
    assert host.store.inner.stat(lineage.dependent_object(Table(host.bucket, "ds/a", "ds", "a"), "ds/fact"))

    arrive(host, "ds/a", 0, 1, 2, 3)
    assert host.applied("ds/fact") == []  # b has nothing yet
    arrive(host, "ds/b", 0)
    assert host.applied("ds/fact") == [rel(0)]
    arrive(host, "ds/b", 1, 2)
    assert host.applied("ds/fact") == [rel(0), rel(1), rel(2)]
    assert watermark(host, "ds/fact") == datetime(2026, 1, 1, 3, tzinfo=UTC)

    manifests = step_manifests(host)
    windows = sorted((b.rel, b.window_start, b.window_end) for m in manifests for b in m.batches)
    assert windows == [
        (rel(h), datetime(2026, 1, 1, h, tzinfo=UTC), datetime(2026, 1, 1, h + 1, tzinfo=UTC))
        for h in range(3)
    ]
    assert all(b.data_uris == () for m in manifests for b in m.batches)
    assert max(len(m.batches) for m in manifests) <= 2  # maxstep 2h: at most two 1h steps per job

    arrive(host, "ds/b", 3, 4, 5, 6)  # a catch-up: a's hours 03 and b's 03-06 allow step 03 only
    assert host.applied("ds/fact") == [rel(0), rel(1), rel(2), rel(3)]
    arrive(host, "ds/a", 4, 5, 6, 7)
    assert host.applied("ds/fact") == [rel(h) for h in range(7)]
    catch_up = [[b.rel for b in m.batches] for m in step_manifests(host) if m.batches[0].rel >= rel(4)]
    assert sorted(catch_up) == [[rel(4), rel(5)], [rel(6)]]  # one wake, coalesced up to maxstep

    # Nothing further is due: another sweep publishes nothing and applies nothing twice, even with
    # its record of published steps lost and its watermark behind (the lock's position still says).
    host.store.inner.remove("ds/fact/_turnstile/steps.json")
    host.store.inner.remove("ds/fact/_turnstile/watermark.json")
    sweeper.sweep(invocation(host))
    host.drain()
    assert host.applied("ds/fact") == [rel(h) for h in range(7)]
    assert host.backlog("ds/fact") == []
    assert watermark(host, "ds/fact") == datetime(2026, 1, 1, 7, tzinfo=UTC)  # repaired


def test_a_source_of_quarter_hour_batches_completes_an_hour_only_when_the_next_one_begins(
    host: Host,
) -> None:
    configure(host, "ds/a", HOURLY)
    derived = {"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["ds.a"]}
    configure(host, "ds/fact", derived, ordered=False)
    sweeper.sweep(invocation(host))
    for quarter in ("00", "15"):
        host.put_batch(f"{hour('ds/a', 0)}/{quarter}")
        host.drain()
        assert watermark(host, "ds/a") == datetime(2026, 1, 1, 0, tzinfo=UTC)  # hour 00 may go on
        assert host.applied("ds/fact") == []
    host.put_batch(f"{hour('ds/a', 0)}/45")
    host.put_batch(f"{hour('ds/a', 1)}/00")
    host.drain()
    assert watermark(host, "ds/a") == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert host.applied("ds/fact") == [rel(0)]  # built once all of hour 00 was committed
    assert host.applied("ds/a") == [f"{rel(0)}/00", f"{rel(0)}/15", f"{rel(0)}/45", f"{rel(1)}/00"]


def test_a_lost_wake_up_and_an_expired_delay_are_covered_by_the_sweeper(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(host, "ds/fact", HOURLY | {"depends_on": ["ds.a"], "delay": "30m"})
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    current = now.strftime("%Y/%m/%d/%H")  # the hour under way: it ends within the hour
    host.put_batch(f"ds/a/{current}")
    host.put_batch(f"ds/fact/{current}")
    host.drain()
    assert host.applied("ds/a") == [current]
    assert host.applied("ds/fact") == []
    reasons = waiting_for(host, "ds/fact")
    assert len(reasons) == 1 and reasons[0].startswith("the delay until ")

    state = TableState(invocation(host), Table(host.bucket, "ds/fact", "ds", "fact"))
    assert sweeper.facts(state).waiting
    assert sweeper.verdict(sweeper.facts(state), 540) is sweeper.Verdict.OK  # no wake while waiting

    later = FixedClock(now + timedelta(hours=1, minutes=31))
    report = {r["table"]: r for r in sweeper.sweep(invocation(host, later))}
    assert report[f"gs://{host.bucket}/ds/fact"]["verdict"] == "wake"


def test_a_batch_whose_natural_time_cannot_be_read_blocks_the_table_naming_it(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    custom = {"regex": r"dt=(?P<time>[0-9]{10})", "format": "%Y%m%d%H"}
    configure(host, "ds/fact", {"natural_time": custom, "depends_on": ["ds.a"]})
    arrive(host, "ds/a", 0, 1)
    host.put_batch("ds/fact/dt=2026010100")
    host.put_batch("ds/fact/dt=2026013200")  # January 32nd
    host.drain()
    assert host.applied("ds/fact") == ["dt=2026010100"]
    held = host.lock("ds/fact")
    assert held.state is LockState.FAILED and held.failed_rel == "dt=2026013200"
    assert "does not read as '%Y%m%d%H'" in (held.error or "") and "--skip-head" in (held.error or "")


def test_a_key_completed_below_the_table_does_not_hide_its_dependencies(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(host, "ds/fact", HOURLY | {"depends_on": ["ds.a"], "mode": "merge"})
    host.upload("ds/fact/2026/_config/load.json", json.dumps({"merge_keys": ["id"]}).encode())
    arrive(host, "ds/fact", 0)
    assert host.applied("ds/fact") == []  # waits for ds/a although the table level alone lacks merge_keys
    arrive(host, "ds/a", 0)
    assert host.applied("ds/fact") == [rel(0)]


def test_a_derived_step_is_built_again_with_turnstile_reprocess(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(
        host,
        "ds/fact",
        {"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["ds.a"]},
        ordered=False,
    )
    sweeper.sweep(invocation(host))
    arrive(host, "ds/a", 0, 1)
    assert host.applied("ds/fact") == [rel(0), rel(1)]
    # A source hour was reprocessed upstream: build step 00 again (a step has no _SUCCESS of its own).
    done = reprocess_ops.request(invocation(host), f"ds/fact/{rel(0)}/_SUCCESS", reason="source fixed")
    assert (done.rel, done.generation) == (rel(0), lineage.STEP_GENERATION)
    host.drain()
    assert [r for r, _ in host.tables.commits["ds/fact"]] == [rel(0), rel(1), rel(0)]
    assert host.lock("ds/fact").state is LockState.FREE
    assert host.backlog("ds/fact") == []
    with pytest.raises(Refused, match="never committed"):  # a step not built yet: nothing to redo
        reprocess_ops.request(invocation(host), f"ds/fact/{rel(5)}/_SUCCESS")


def test_an_unordered_table_that_asks_to_wait_is_recorded_as_failed_not_applied_early(host: Host) -> None:
    configure(host, "ds/a", HOURLY)
    configure(host, "ds/late", HOURLY | {"depends_on": ["ds.a"]}, ordered=False)
    arrive(host, "ds/late", 0)
    assert host.applied("ds/late") == []  # not before ds/a has anything
    [alert] = [r for r in host.log_records() if r.get("event") == "batch_failed"]
    assert alert["severity"] == "ERROR"
    assert f"gs://{host.bucket}/ds/late/_config/load.json sets depends_on or delay" in str(alert["error"])
    assert "put an ORDERME in its _config/" in str(alert["error"])
    shown = status_ops.table_status(invocation(host), Table(host.bucket, "ds/late", "ds", "late"))
    [failed] = shown.failed_batches
    assert failed.rel == rel(0)
    # Without the keys, `retry` applies it.
    configure(host, "ds/late", HOURLY, ordered=False)
    retry_ops.retry(invocation(host), f"{hour('ds/late', 0)}/_SUCCESS")
    host.drain()
    assert host.applied("ds/late") == [rel(0)]


def test_a_dependency_that_can_never_be_met_blocks_the_table_with_the_reason(host: Host) -> None:
    # A dataset-level depends_on names a table of the dataset: that table would wait for itself.
    configure(host, "dl", HOURLY | {"depends_on": ["dl.src"]})
    configure(host, "ln/usrc", HOURLY, ordered=False)  # natural time, but no watermark: unordered
    configure(host, "ln/udep", HOURLY | {"depends_on": ["ln.usrc"]})
    arrive(host, "dl/src", 0)
    arrive(host, "ln/usrc", 0)
    arrive(host, "ln/udep", 0)
    src, udep = host.lock("dl/src"), host.lock("ln/udep")
    assert src.state is LockState.FAILED and udep.state is LockState.FAILED
    assert src.error is not None and "depends_on names the table itself (dl/src)" in src.error
    assert (
        udep.error is not None and f"gs://{host.bucket}/ln/usrc, which is not an ordered table" in udep.error
    )
    assert host.applied("dl/src") == [] and host.applied("ln/udep") == []
    assert [r for r in host.log_records() if r.get("event") == "table_blocked"]


def test_a_source_named_before_it_exists_is_waited_for_and_not_listed_as_a_table(host: Host) -> None:
    configure(host, "ln/never", HOURLY | {"depends_on": ["ln.ghost"]})
    arrive(host, "ln/never", 0)
    assert waiting_for(host, "ln/never") == (
        "ln/ghost to reach 2026-01-01T01:00:00+00:00 (its watermark: none yet)",
    )
    shown = [s.table for s in status_ops.statuses(invocation(host), "ln", {})]
    assert shown == ["ln.never"]  # ln/ghost holds only the record that ln/never waits for it
    configure(host, "ln/ghost", HOURLY)
    arrive(host, "ln/ghost", 0)  # it appears: its commit wakes the table that waited
    assert host.applied("ln/never") == [rel(0)]
    assert [s.table for s in status_ops.statuses(invocation(host), "ln", {})] == ["ln.ghost", "ln.never"]


def derive(host: Host, table: str, *sources: str) -> None:
    steps = {"step": "1h", "start": "2026-01-01T00:00:00Z"}
    configure(host, table, {"derived": steps, "depends_on": list(sources)}, ordered=False)


def test_a_derived_table_whose_dependency_can_never_be_met_is_blocked_with_the_reason(host: Host) -> None:
    configure(host, "src/u", HOURLY, ordered=False)  # a natural time, but unordered: no watermark
    configure(host, "src/plain", {})  # ordered, no natural time: no watermark
    arrive(host, "src/u", 0)
    arrive(host, "src/plain", 0)
    derive(host, "dv/unord", "src.u")
    derive(host, "dv/self", "dv.self")
    derive(host, "dv/plain", "src.plain")
    derive(host, "dv/p", "dv.q")
    derive(host, "dv/q", "dv.p")
    sweeper.sweep(invocation(host))  # wakes each: its run blocks it
    host.drain()
    errors = {t: host.lock(t).error or "" for t in ("dv/unord", "dv/self", "dv/plain", "dv/p", "dv/q")}
    assert {t: host.lock(t).state for t in errors} == dict.fromkeys(errors, LockState.FAILED)
    assert f"gs://{host.bucket}/src/u, which is not an ordered table" in errors["dv/unord"]
    assert "depends_on names the table itself (dv/self)" in errors["dv/self"]
    assert f"gs://{host.bucket}/src/plain, which has no natural_time" in errors["dv/plain"]
    assert "a dependency cycle dv/p -> dv/q -> dv/p" in errors["dv/p"]
    assert "a dependency cycle dv/q -> dv/p -> dv/q" in errors["dv/q"]
    blocked = {r["table"] for r in host.log_records() if r.get("event") == "table_blocked"}
    assert set(errors) <= blocked
    shown = status_ops.table_status(invocation(host), Table(host.bucket, "dv/self", "dv", "self"))
    assert shown.health.value == "BLOCKED" and shown.lock is not None and shown.lock.failed_rel == rel(0)
    # Fixed, then unlocked: it builds its steps.
    derive(host, "dv/plain", "src.u")
    configure(host, "src/u", HOURLY)
    arrive(host, "src/u", 1)
    operator.unlock(invocation(host), Table(host.bucket, "dv/plain", "dv", "plain"), skip_head=False)
    host.drain()
    assert host.applied("dv/plain") == [rel(0), rel(1)]


def test_a_cycle_of_file_tables_blocks_them_instead_of_waiting(host: Host) -> None:
    configure(host, "cyc/x", HOURLY | {"depends_on": ["cyc.y"]})
    configure(host, "cyc/y", HOURLY | {"depends_on": ["cyc.x"]})
    arrive(host, "cyc/x", 0)
    held = host.lock("cyc/x")
    assert held.state is LockState.FAILED
    assert held.error is not None and "a dependency cycle cyc/x -> cyc/y -> cyc/x" in held.error


def test_a_derived_table_that_never_starts_ages_and_says_why_it_waits(host: Host) -> None:
    derive(host, "dv/never", "src.never")  # no such table (yet): waited for, and said so
    sweeper.sweep(invocation(host))
    host.drain()
    assert host.lock("dv/never").state is LockState.FREE
    table = Table(host.bucket, "dv/never", "dv", "never")
    shown = status_ops.table_status(invocation(host), table)
    assert shown.ordered and "derived" in shown.ordered_by
    [wait] = shown.waiting_for
    assert "src/never to reach 2026-01-01T01:00:00+00:00 (its watermark: none yet)" in wait
    assert "src/never has no objects in the bucket yet" in wait
    # Its first step could have started at 01:00: the backlog-age metric counts from there.
    later = FixedClock(datetime(2026, 1, 1, 3, tzinfo=UTC))
    state = TableState(invocation(host, later), table)
    assert sweeper.backlog_metrics(state).oldest_pending_age_seconds == 2 * 3600


def test_a_dependent_of_a_blocked_source_says_so(host: Host) -> None:
    configure(host, "src/b", HOURLY)
    derive(host, "dv/both", "src.b")
    sweeper.sweep(invocation(host))
    arrive(host, "src/b", 0)
    host.upload(f"{hour('src/b', 1)}/_config/load.json", b"{not json")  # its next batch cannot be read
    arrive(host, "src/b", 1)
    assert host.lock("src/b").state is LockState.FAILED
    [wait] = status_ops.table_status(
        invocation(host), Table(host.bucket, "dv/both", "dv", "both")
    ).waiting_for
    assert f"src/b is BLOCKED at '{rel(1)}': turnstile status gs://{host.bucket}/src/b" in wait
