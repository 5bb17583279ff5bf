"""`turnstile history`: result records in the order the table applies its batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.cli.conftest import Run, World
from turnstile.config.settings import Settings
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import ObjectRef
from turnstile.ops import session
from turnstile.protocol import handler, unordered
from turnstile.protocol.handler import Handled
from turnstile.state.records import BatchOutcome, ExpectationCount, OpenJob

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


def test_an_unordered_batch_refused_before_any_job_is_listed_from_its_failure_record(
    run: Run, world: World
) -> None:
    """A Spark-partitioned CSV batch (its data only in `dt=.../` sub-folders) with `nested` unset: the
    event function refuses it with a clear message and records the failure, but no job ran, so there
    is no result record. `history` lists it as FAILED with that message, as `status` does."""
    world.result(f"{D}/12", 5)
    folder = world.table.batch_folder(f"{D}/13")
    for day in ("2024-05-01", "2024-05-02"):
        world.store.write(f"{folder}dt={day}/part-00000-c000.csv", b"id\n1\n")
    generation = world.store.write(f"{folder}_SUCCESS", b"")
    ref = ObjectRef.of(world.store.bucket, f"{folder}_SUCCESS", generation)
    runner = InlineRunner(world.store, MemoryTables())
    inv = session.invocation(world.store, Settings.from_env({}), runner)
    assert handler.handle(inv, ref) == Handled.FAILED
    assert runner.submitted == []  # refused before any job
    status = json.loads(run("status", world.uri, "-o", "json").stdout)
    [failure] = next(t for t in status["tables"] if t["table"] == "sales.orders")["failed_batches"]
    assert "sub-folders" in failure["error"]

    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    assert report["total"] == 2
    [applied, failed] = report["entries"]
    assert (applied["rel"], applied["outcome"]) == (f"{D}/12", "COMMITTED")
    assert (failed["rel"], failed["generation"], failed["outcome"]) == (f"{D}/13", generation, "FAILED")
    assert failed["error"] == failure["error"]
    assert failed["job_id"] == failure["job_id"]
    assert failed["finished_at"] == failure["failed_at"]
    assert failed["object"] == f"{world.uri}/_turnstile/failures/{D}/13/{generation}.json"
    assert (failed["rows_written"], failed["snapshot_id"]) == (0, None)

    lines = run("history", world.uri).stdout.splitlines()
    row = next(line for line in lines if line.startswith(f"{D}/13 "))
    assert row.split()[1:3] == [str(generation), "FAILED"]
    assert "has no data files of its own" in row


def test_a_failed_job_with_its_failure_record_is_listed_once(run: Run, world: World) -> None:
    """The job wrote a FAILED result record and the function a failure record for the same attempt:
    one entry, the job's, with its counts."""
    generation = world.upload(f"{D}/13")
    world.result(f"{D}/13", generation, outcome=BatchOutcome.FAILED, rows=0)
    marker = OpenJob(
        job_id="j-13",
        success=f"{world.table.batch_folder(f'{D}/13')}_SUCCESS",
        success_generation=generation,
        rel=f"{D}/13",
        submitted_at=datetime.now(UTC),
    )
    world.store.create(world.table.open_job("j-13"), marker.encode())
    unordered.failed(world.inv, world.table, marker, "boom", transient=False)
    assert world.store.stat(world.table.failure(f"{D}/13", generation)) is not None
    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    assert report["total"] == 1
    [entry] = report["entries"]
    assert (entry["outcome"], entry["error"]) == ("FAILED", "boom")
    assert entry["object"] == f"{world.uri}/_turnstile/results/{D}/13/{generation}.json"


def test_a_batch_dropped_by_unlock_skip_head_reads_dropped_as_in_status(run: Run, world: World) -> None:
    """`unlock --skip-head` records the dropped batch as FAILED with an error saying so (so nothing
    queues it again); `status` shows DROPPED, and so does `history`, in text and JSON."""
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.result(f"{D}/14", 7)
    generation = world.queue(f"{D}/13")
    world.fail(f"{D}/13", error=f"batch '{D}/13' arrived after '{D}/14'", position=f"{D}/14")
    assert run("unlock", world.uri, "--skip-head", "--yes").exit_code == 0
    status = json.loads(run("status", world.uri, "-o", "json").stdout)
    shown = next(t for t in status["tables"] if t["table"] == "sales.orders")["last_result"]
    assert (shown["rel"], shown["outcome"]) == (f"{D}/13", "DROPPED")

    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    outcomes = [(e["rel"], e["generation"], e["outcome"]) for e in report["entries"]]
    assert outcomes == [(f"{D}/13", generation, "DROPPED"), (f"{D}/14", 7, "COMMITTED")]
    assert report["entries"][0]["error"].startswith("dropped by an operator (unlock --skip-head)")
    lines = run("history", world.uri).stdout.splitlines()
    row = next(line for line in lines if line.startswith(f"{D}/13 "))
    assert row.split()[1:3] == [str(generation), "DROPPED"]
    assert "dropped by an operator" in row


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


def test_the_rows_failing_each_expectation_are_shown_as_text_and_json(run: Run, world: World) -> None:
    counts = (
        ExpectationCount(name="positive_amount", on_fail="drop", failed_rows=2),
        ExpectationCount(name="has_id", on_fail="warn", failed_rows=0),
        ExpectationCount(name="known_country", on_fail="warn", failed_rows=5),
    )
    world.result(f"{D}/12", 5, expectations=counts)
    world.result(f"{D}/13", 6, expectations=tuple(c.model_copy(update={"failed_rows": 0}) for c in counts))
    world.result(f"{D}/14", 7)  # written before the table had expectations
    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    assert [e["expectations"] for e in report["entries"]] == [
        [
            {"name": "positive_amount", "on_fail": "drop", "failed_rows": 2},
            {"name": "has_id", "on_fail": "warn", "failed_rows": 0},
            {"name": "known_country", "on_fail": "warn", "failed_rows": 5},
        ],
        [
            {"name": "positive_amount", "on_fail": "drop", "failed_rows": 0},
            {"name": "has_id", "on_fail": "warn", "failed_rows": 0},
            {"name": "known_country", "on_fail": "warn", "failed_rows": 0},
        ],
        [],
    ]
    text = run("history", world.uri, "--last", "0")
    assert text.exit_code == 0, text.output
    header, *lines = [line for line in text.stdout.splitlines() if line.strip()]
    assert header.split()[-1] == "EXPECTATIONS"
    assert "positive_amount 2 dropped, known_country 5 warned" in " ".join(lines[0].split())
    assert lines[1].split()[-1] == "passed"
    assert lines[2].split()[-1] == "-"  # no expectations: an empty cell
