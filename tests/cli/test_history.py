"""`turnstile history`: result records in the order the table applies its batches."""

from __future__ import annotations

import json

from tests.cli.conftest import Run, World
from turnstile.state.records import BatchOutcome

D = "incremental/2024/05/01"


def test_records_are_listed_in_rel_order_then_generation(run: Run, world: World) -> None:
    # Written out of order; generations 9 and 10 of one batch sort as numbers, not as names.
    world.result(f"{D}/14", 30)
    world.result(f"{D}/12", 5, rows=3, bad_rows=1, snapshot_id=111)
    world.result(f"{D}/13", 10)
    world.result(f"{D}/13", 9, outcome=BatchOutcome.FAILED, rows=0, snapshot_id=None)
    world.result("historical/2023", 2)
    result = run("history", world.uri, "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["total"] == 5
    order = [(e["rel"], e["generation"], e["outcome"]) for e in report["entries"]]
    assert order == [
        ("historical/2023", 2, "COMMITTED"),
        (f"{D}/12", 5, "COMMITTED"),
        (f"{D}/13", 9, "FAILED"),
        (f"{D}/13", 10, "COMMITTED"),
        (f"{D}/14", 30, "COMMITTED"),
    ]
    twelve = report["entries"][1]
    assert (twelve["rows_written"], twelve["bad_rows"], twelve["seconds"], twelve["snapshot_id"]) == (
        3,
        1,
        1.5,
        111,
    )
    assert twelve["finished_at"] == "2024-05-01T14:00:00+00:00"
    assert twelve["object"] == f"{world.uri}/_turnstile/results/{D}/12/5.json"

    text = run("history", world.uri)
    lines = text.stdout.splitlines()
    assert lines[0].split() == [
        "REL",
        "GENERATION",
        "OUTCOME",
        "ROWS",
        "BAD",
        "ROWS",
        "SECONDS",
        "SNAPSHOT",
        "FINISHED",
        "AT",
        "ERROR",
    ]
    assert [line.split()[:3] for line in lines[1:6]] == [[r, str(g), o] for r, g, o in order]
    assert lines[2].split()[3:9] == ["3", "1", "1.5", "111", "2024-05-01", "14:00:00"]
    assert lines[3].split()[-1] == "boom"  # the failed attempt's error


def test_last_n(run: Run, world: World) -> None:
    for hour in range(10, 16):
        world.result(f"{D}/{hour}", hour)
    report = json.loads(run("history", world.uri, "--last", "2", "-o", "json").stdout)
    assert report["total"] == 6
    assert [e["rel"] for e in report["entries"]] == [f"{D}/14", f"{D}/15"]
    text = run("history", world.uri, "--last", "2").stdout
    assert "the last 2 of 6 records; --last 0 shows all" in text
    everything = json.loads(run("history", world.uri, "--last", "0", "-o", "json").stdout)
    assert len(everything["entries"]) == 6


def test_an_unreadable_record_is_shown_not_fatal(run: Run, world: World) -> None:
    world.result(f"{D}/12", 5)
    world.store.write(world.table.result(f"{D}/13", 6), b"not json")
    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    assert [e["outcome"] for e in report["entries"]] == ["COMMITTED", "UNREADABLE"]
    assert "does not hold a turnstile batchresult" in report["entries"][1]["error"]


def test_no_records_yet(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")  # a batch, not applied yet
    result = run("history", world.uri)
    assert result.exit_code == 0
    assert "no result records" in result.stdout


def test_a_page_further_back_holds_the_records_before_the_newest_ones(world: World) -> None:
    """`offset` pages back from the newest records (the console's history pages)."""
    from turnstile.ops.history import history

    for hour in range(10, 15):
        world.result(f"{D}/{hour}", hour)

    def page(last: int | None, offset: int) -> list[str]:
        found = history(world.store, world.table, success_filename="_SUCCESS", last=last, offset=offset)
        assert found.total == 5
        return [e.rel.rpartition("/")[2] for e in found.entries]

    assert page(2, 0) == ["13", "14"]
    assert page(2, 2) == ["11", "12"]
    assert page(2, 4) == ["10"]
    assert page(2, 5) == []
    assert page(None, 3) == ["10", "11"]
