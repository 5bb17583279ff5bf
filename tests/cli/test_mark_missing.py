"""`turnstile mark-missing` and what `turnstile status` says of a missing period: a source whose
hour 13 is missing while hour 14 is committed holds its dependents at 13:00 until the hour is
marked missing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.cli.conftest import Run, World, one_error_line
from turnstile.state.records import Dependent, MissingPeriod, Watermark

H13 = datetime(2024, 5, 1, 13, tzinfo=UTC)
H14, H15 = H13 + timedelta(hours=1), H13 + timedelta(hours=2)
MARK = "web/clicks/_turnstile/watermark.json"


def source_with_a_gap(world: World, *, since: datetime) -> str:
    """web.clicks committed hours 12 and 14; sales.orders registered as its dependent."""
    world.store.write("web/clicks/_config/load.json", b'{"natural_time": "hourly"}')
    world.store.write("web/clicks/_config/ORDERME", b"")
    mark = Watermark(
        watermark=H13, rel="2024/05/01/14", updated_at=since, ahead=((H14, H15),), last=H15, gap_since=since
    )
    world.store.write(MARK, mark.encode())
    world.store.write(
        "web/clicks/_turnstile/dependents/sales~orders.json", Dependent(table="sales/orders").encode()
    )
    return f"gs://{world.store.bucket}/web/clicks"


def test_status_shows_the_missing_period_how_long_and_whom_it_holds(run: Run, world: World) -> None:
    uri = source_with_a_gap(world, since=datetime.now(UTC) - timedelta(hours=7))
    clicks = {t["table"]: t for t in json.loads(run("status", "-o", "json").stdout)["tables"]}["web.clicks"]
    assert clicks["watermark"] == H13.isoformat()
    assert clicks["missing_period"] == H13.isoformat()
    assert 7 * 3600 <= clicks["missing_seconds"] <= 7 * 3600 + 60
    assert clicks["missing_holds"] == ["sales/orders"]
    assert clicks["missing_over_max"] is True  # max_gap_wait is 6h by default
    assert clicks["missing_command"] == f"turnstile mark-missing {uri} 2024/05/01/13"
    out = run("status").stdout
    assert "web.clicks: period 2024-05-01T13:00:00+00:00 is missing for 7h" in out
    assert "(over max_gap_wait: the watermark_gap alert)" in out and "holding sales/orders" in out


def test_a_gap_younger_than_max_gap_wait_is_shown_without_the_alert(run: Run, world: World) -> None:
    source_with_a_gap(world, since=datetime.now(UTC) - timedelta(minutes=30))
    clicks = {t["table"]: t for t in json.loads(run("status", "-o", "json").stdout)["tables"]}["web.clicks"]
    assert clicks["missing_period"] == H13.isoformat() and clicks["missing_over_max"] is False


def test_mark_missing_names_the_expected_format_for_a_malformed_period(run: Run, world: World) -> None:
    uri = source_with_a_gap(world, since=datetime.now(UTC))
    before = world.store.read(MARK)
    result = run("mark-missing", uri, "2024-05-01T13", "--yes")
    assert result.exit_code == 2
    error = one_error_line(result)
    assert "'2024-05-01T13' is not a period of this table" in error
    assert "natural_time format '%Y/%m/%d/%H', e.g. '2026/01/01/10'" in error
    assert world.store.read(MARK) == before


def test_mark_missing_dry_run_and_no_terminal_change_nothing(run: Run, world: World) -> None:
    uri = source_with_a_gap(world, since=datetime.now(UTC))
    before = world.store.read(MARK)
    dry = run("mark-missing", uri, "2024/05/01/13", "--dry-run")
    assert dry.exit_code == 0 and "would record period 2024/05/01/13" in dry.stdout
    refused = run("mark-missing", uri, "2024/05/01/13")
    assert refused.exit_code == 2 and "pass --yes" in one_error_line(refused)
    assert world.store.read(MARK) == before
    assert not world.store.list_objects("web/clicks/_turnstile/missing/")


def test_mark_missing_records_the_period_and_moves_the_watermark_past_the_gap(run: Run, world: World) -> None:
    uri = source_with_a_gap(world, since=datetime.now(UTC))
    result = run("mark-missing", uri, "2024/05/01/13", "--reason", "collector down", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert (shown["watermark"], shown["missing"]) == (H15.isoformat(), None)
    found = world.store.read("web/clicks/_turnstile/missing/20240501T130000Z.json")
    assert found is not None
    assert MissingPeriod.decode(found.data, found.name).reason == "collector down"
    again = run("mark-missing", uri, "2024/05/01/13", "--yes")
    assert again.exit_code == 2 and "before the watermark" in one_error_line(again)
    clicks = {t["table"]: t for t in json.loads(run("status", "-o", "json").stdout)["tables"]}["web.clicks"]
    assert clicks["watermark"] == H15.isoformat() and clicks["missing_period"] is None


def test_mark_missing_refuses_a_table_without_natural_time_and_a_committed_period(
    run: Run, world: World
) -> None:
    uri = source_with_a_gap(world, since=datetime.now(UTC))
    result = run("mark-missing", uri, "2024/05/01/14", "--yes")  # committed: nothing is missing
    assert result.exit_code == 2
    assert "period 2024/05/01/14 has batches committed or is declared already" in one_error_line(result)
    world.store.write("web/clicks/_config/load.json", b"{}")
    result = run("mark-missing", uri, "2024/05/01/13", "--yes")
    assert result.exit_code == 2
    error = one_error_line(result)
    assert "has no natural_time, so it has no periods to mark" in error
    assert 'set "natural_time" in its _config/load.json' in error
