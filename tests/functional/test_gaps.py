"""Gap-aware watermarks end to end: a source with a missing hour holds its dependents at the gap
until the hour lands, is dropped by an operator, or is marked missing.

Real CloudEvents through functions/main.py on fake-gcs-server (harness.py) and the in-process
runner, as in test_dependencies.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.functional.harness import Host
from tests.functional.scenario import invocation
from tests.functional.test_dependencies import HOURLY, arrive, configure, hour, rel, watermark
from turnstile.names.paths import Table
from turnstile.ops import mark_missing as missing_ops
from turnstile.ops import skip as skip_ops
from turnstile.ops import status as status_ops
from turnstile.ops.errors import Refused
from turnstile.protocol import operator, sweeper
from turnstile.state.records import Watermark

MARK = "ds/sensors/_turnstile/watermark.json"
MART = {"derived": {"step": "1h", "start": "2026-01-01T10:00:00Z"}, "depends_on": ["ds.sensors"]}


def at(h: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h)


def sensors(host: Host) -> Table:
    return Table(host.bucket, "ds/sensors", "ds", "sensors")


def mart_over_sensors(host: Host, load: dict[str, object] = HOURLY) -> None:
    configure(host, "ds/sensors", load)
    configure(host, "ds/mart", MART, ordered=False)
    sweeper.sweep(invocation(host))  # registers the derived table with its source


def test_the_mart_stops_at_a_missing_source_hour_until_it_is_marked_missing(host: Host) -> None:
    mart_over_sensors(host)
    arrive(host, "ds/sensors", 10, 12)
    assert host.applied("ds/sensors") == [rel(10), rel(12)]
    assert watermark(host, "ds/sensors") == at(11)  # not 13:00: hour 11 is missing
    assert host.applied("ds/mart") == [rel(10)]  # not hour 11 nor 12: they lie beyond the gap
    sweeper.sweep(invocation(host))
    host.drain()
    assert host.applied("ds/mart") == [rel(10)]

    shown = status_ops.table_status(invocation(host), sensors(host)).to_json()
    assert shown["missing_period"] == at(11) and shown["missing_holds"] == ("ds/mart",)
    assert shown["missing_seconds"] is not None and shown["missing_seconds"] >= 0

    with pytest.raises(Refused, match=r"'2026-01-01 11'.*natural_time format '%Y/%m/%d/%H', e.g."):
        missing_ops.mark_missing(invocation(host), sensors(host), "2026-01-01 11")
    with pytest.raises(Refused, match="before the watermark"):
        missing_ops.mark_missing(invocation(host), sensors(host), "2026/01/01/10")
    with pytest.raises(Refused, match="committed or is declared already"):
        missing_ops.mark_missing(invocation(host), sensors(host), "2026/01/01/12")

    done = missing_ops.mark_missing(invocation(host), sensors(host), "2026/01/01/11", "sensor offline")
    host.drain()
    assert (done.watermark, done.missing) == (at(13), None)
    assert host.view.read("ds/sensors/_turnstile/missing/20260101T110000Z.json") is not None
    assert watermark(host, "ds/sensors") == at(13)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    shown = status_ops.table_status(invocation(host), sensors(host)).to_json()
    assert shown["missing_period"] is None


def test_the_missing_hour_landing_late_lets_the_mart_go_on(host: Host) -> None:
    mart_over_sensors(host)
    arrive(host, "ds/sensors", 10, 12)
    assert host.applied("ds/mart") == [rel(10)]
    arrive(host, "ds/sensors", 11)  # a late batch: it blocks the source until let through
    assert host.applied("ds/mart") == [rel(10)]
    operator.unlock(invocation(host), sensors(host), skip_head=False)
    host.drain()
    assert host.applied("ds/sensors") == [rel(10), rel(12), rel(11)]
    assert watermark(host, "ds/sensors") == at(13)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]


def test_a_batch_dropped_by_skip_or_unlock_skip_head_fills_its_hour(host: Host) -> None:
    mart_over_sensors(host)
    host.tables.failing.add(rel(11))
    arrive(host, "ds/sensors", 10, 11, 12, 13)  # 11 fails and blocks the source; 12, 13 queue
    host.tables.failing.clear()
    skip_ops.skip(invocation(host), f"{hour('ds/sensors', 12)}/_SUCCESS", "nothing to load")
    operator.unlock(invocation(host), sensors(host), skip_head=True)  # drops 11
    host.drain()
    assert host.applied("ds/sensors") == [rel(10), rel(13)]
    assert watermark(host, "ds/sensors") == at(14)
    assert host.applied("ds/mart") == [rel(h) for h in range(10, 14)]


def test_gaps_ignore_keeps_the_last_commit(host: Host) -> None:
    mart_over_sensors(host, HOURLY | {"gaps": "ignore"})
    arrive(host, "ds/sensors", 10, 12)
    assert watermark(host, "ds/sensors") == at(13)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    shown = status_ops.table_status(invocation(host), sensors(host)).to_json()
    assert shown["missing_period"] is None


def test_a_watermark_update_lost_after_a_commit_is_made_up_from_the_result_records(host: Host) -> None:
    """A subscriber that stopped between its commit and the watermark: the next commit (and the
    sweeper's repair) count the committed hour from its result record, so the watermark starts at
    the first committed hour, not at the next one, and the gap after it still holds."""
    mart_over_sensors(host)
    arrive(host, "ds/sensors", 10)
    host.store.inner.remove("ds/sensors/_turnstile/watermark.json")
    arrive(host, "ds/sensors", 12)
    assert watermark(host, "ds/sensors") == at(11)
    host.store.inner.remove("ds/sensors/_turnstile/watermark.json")
    sweeper.sweep(invocation(host))
    host.drain()
    assert watermark(host, "ds/sensors") == at(11)
    assert host.applied("ds/mart") == [rel(10)]


def test_a_gap_older_than_max_gap_wait_raises_the_watermark_gap_alert(host: Host) -> None:
    mart_over_sensors(host, HOURLY | {"max_gap_wait": "1h"})
    arrive(host, "ds/sensors", 10, 12)
    sweeper.sweep(invocation(host))
    assert not events(host, "watermark_gap")  # seen missing just now
    found = host.store.inner.read(MARK)
    assert found is not None
    seen = Watermark.decode(found.data, MARK)
    assert seen.gap_since is not None
    earlier = seen.model_copy(update={"gap_since": seen.gap_since - timedelta(hours=2)})
    host.store.inner.write(MARK, earlier.encode())
    sweeper.sweep(invocation(host))
    [alert] = events(host, "watermark_gap")
    assert alert["severity"] == "ERROR" and alert["missing_period"] == at(11).isoformat()
    assert alert["dependents"] == ["ds/mart"] and alert["bucket"] == host.bucket
    assert f"turnstile mark-missing gs://{host.bucket}/ds/sensors 2026/01/01/11" in str(alert["message"])


def events(host: Host, name: str) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == name]


def test_gaps_unset_waits_only_once_a_dependent_has_registered(host: Host) -> None:
    """A source no table depends on follows its last commit (a gap then holds nothing later); once
    a dependent registered with it (here the sweeper registers a table of files whose batches have
    not waited yet), a gap holds its watermark."""
    configure(host, "ds/sensors", HOURLY)
    arrive(host, "ds/sensors", 10, 12)
    assert watermark(host, "ds/sensors") == at(13)  # no dependent: the last commit's
    configure(host, "ds/fact", HOURLY | {"depends_on": ["ds.sensors"]})
    sweeper.sweep(invocation(host))
    assert host.view.stat("ds/sensors/_turnstile/dependents/ds~fact.json") is not None
    arrive(host, "ds/sensors", 13, 15)
    assert watermark(host, "ds/sensors") == at(14)  # hour 14 is missing
    arrive(host, "ds/fact", 13, 14)
    assert host.applied("ds/fact") == [rel(13)]
    shown = status_ops.table_status(invocation(host), sensors(host)).to_json()
    assert shown["missing_period"] == at(14) and shown["missing_holds"] == ("ds/fact",)
