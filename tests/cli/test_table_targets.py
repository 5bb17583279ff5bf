"""A command that acts on a table (pause, resume, cancel, unlock) refuses a URI that names no table
at all: a batch folder, or a prefix with nothing under it (a typo), and changes nothing."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Run, World, one_error_line

COMMANDS = [["pause"], ["resume"], ["cancel"], ["unlock", "--yes"]]


def names(world: World) -> list[str]:
    return [o.name for o in world.store.list_objects("")]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_batch_uri_is_refused_naming_its_table(run: Run, world: World, command: list[str]) -> None:
    world.upload("2024/05/01/13")
    before = names(world)
    result = run(command[0], f"{world.uri}/2024/05/01/13", *command[1:])
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"error: {world.uri}/2024/05/01/13 names batch '2024/05/01/13' of table {world.uri}, not a table; "
        f"pass {world.uri}"
    )
    assert names(world) == before


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_table_with_nothing_stored_under_it_is_refused(run: Run, world: World, command: list[str]) -> None:
    world.upload("2024/05/01/13")  # sales/orders exists; sales/order does not
    before = names(world)
    typo = f"gs://{world.store.bucket}/sales/order"
    result = run(command[0], typo, *command[1:])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"nothing is stored under {typo}: no table there; check the name" in line
    assert f"turnstile status gs://{world.store.bucket}" in line
    assert names(world) == before  # no phantom pause, _BACKFILL or claim


def test_an_existing_table_is_paused_and_resumed(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")
    assert run("pause", world.uri).exit_code == 0
    assert world.store.stat(world.table.pause) is not None
    resumed = run("resume", world.uri)
    assert resumed.exit_code == 0
    assert f"lifted the pause of {world.uri}: jobs start again" in resumed.stdout
    assert world.store.stat(world.table.pause) is None


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_bucket_that_does_not_exist_is_named_as_such(run: Run, world: World, command: list[str]) -> None:
    result = run(command[0], "gs://no-such-bucket-xyz/sales/orders", *command[1:])
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "no-such-bucket-xyz" in line and "does not exist" in line
    assert "FREE" not in line and '{"error"' not in line


def test_cancel_without_a_running_job_changes_nothing_and_exits_2(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")
    before = names(world)
    result = run("cancel", world.uri)
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"error: {world.uri}: no job holds the table (the lock is FREE) and no unordered job of it is "
        "running; nothing was changed"
    )
    assert names(world) == before


def test_status_of_a_batch_folder_or_of_a_typo_says_so(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")
    inside = run("status", f"{world.uri}/2024")
    assert inside.exit_code == 2
    assert f"names batch '2024' of table {world.uri}, not a table; pass {world.uri}" in one_error_line(inside)
    typo = run("status", f"gs://{world.store.bucket}/sales/order")
    assert typo.exit_code == 2
    assert "nothing is stored under" in one_error_line(typo)
    assert run("status", world.uri).exit_code == 0


@pytest.mark.parametrize("command", [["history"], ["validate"], ["backfill"], ["backfill", "--dry-run"]])
def test_a_typo_in_the_path_of_a_read_or_publish_command_is_refused_not_reported_clean(
    run: Run, world: World, command: list[str]
) -> None:
    """`validate` of a mistyped prefix said "no problems found" having checked nothing."""
    world.upload("2024/05/01/13")
    typo = f"gs://{world.store.bucket}/sales/ordres"
    result = run(command[0], typo, *command[1:])
    assert result.exit_code == 2
    assert f"nothing is stored under {typo}: " in one_error_line(result)
    assert "check the name" in one_error_line(result)


@pytest.mark.parametrize("where", ["_config/load.json", "sales/orders/_config/load.json"])
def test_a_load_json_that_does_not_validate_does_not_lock_the_operator_out(
    run: Run, world: World, where: str
) -> None:
    """The table commands read the cascade only for a destinationRegex: a bad file (an unknown key at
    the root, a merge without keys at the table) stopped status, history, pause and unlock alike."""
    world.upload("2024/05/01/13")
    bad = {"max_bad_rows": 1} if where.startswith("_config") else {"mode": "merge"}
    world.store.write(where, json.dumps(bad).encode())
    history = run("history", world.uri)
    assert history.exit_code == 0, history.output
    assert "no result records under" in history.stdout
    assert run("pause", world.uri).exit_code == 0
    assert world.store.stat(world.table.pause) is not None
    assert run("resume", world.uri).exit_code == 0
    assert world.store.stat(world.table.pause) is None
    status = run("status", world.uri)
    assert status.exit_code == 1, status.output  # the table's batches cannot be applied: a problem
    assert "sales.orders  UNREADABLE" in status.stdout
    said = (
        f"sales.orders: gs://{world.store.bucket}/_config/load.json: key 'max_bad_rows' is not a known key"
        if where.startswith("_config")
        else f"sales.orders: the merged load.json for gs://{world.store.bucket}/sales/orders/"
    )
    assert said in status.stdout
    everywhere = run("status", f"gs://{world.store.bucket}")
    assert everywhere.exit_code == 1 and "sales.orders  UNREADABLE" in everywhere.stdout


def test_retry_of_a_table_a_typo_or_a_missing_batch_says_which(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")
    bucket = world.store.bucket
    table = run("retry", world.uri)
    assert table.exit_code == 2
    assert one_error_line(table) == (
        f"error: {world.uri} names table sales.orders, not a batch; pass the failed batch's folder, "
        f"{world.uri}/REL (turnstile status {world.uri} lists the failed batches)"
    )
    typo = run("retry", f"gs://{bucket}/sales/ordres/2024/05/01/13")
    assert typo.exit_code == 2
    assert one_error_line(typo) == (
        f"error: nothing is stored under gs://{bucket}/sales/ordres: no table there; check the name"
    )
    missing = run("retry", f"{world.uri}/2024/05/01/14")
    assert missing.exit_code == 2
    assert f"{world.uri}/2024/05/01/14/_SUCCESS does not exist: no batch there; check the path" in (
        one_error_line(missing)
    )


@pytest.mark.parametrize("path", ["/tmp", "sales/orders"])
def test_a_path_without_a_scheme_is_named_as_such(run: Run, world: World, path: str) -> None:
    result = run("status", path)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"'{path}' is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI: it has no scheme" in line
    assert "S3 bucket names" not in line


def test_resume_of_an_unordered_table_speaks_of_its_held_batches_not_a_subscriber(
    run: Run, world: World
) -> None:
    world.upload("2024/05/01/13")
    assert run("pause", world.uri).exit_code == 0
    resumed = run("resume", world.uri)
    assert resumed.exit_code == 0
    assert "the batches held while paused are submitted now" in resumed.stdout
    assert "subscriber" not in resumed.stdout
