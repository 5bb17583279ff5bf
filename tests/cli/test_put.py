"""`turnstile put`: a local folder uploaded as one batch, `_SUCCESS` last; refusals change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run, World, one_error_line
from turnstile.state.records import Lock

REL = "incremental/2024/05/01/13"


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "part-0.csv").write_text("id,amount\n1,10\n")
    (folder / "part-1.csv").write_text("id,amount\n2,20\n3,30\n")
    (folder / "part-2.csv").write_text("id,amount\n4,40\n")
    return folder


def test_uploads_every_file_then_success_last(run: Run, world: World, batch_dir: Path) -> None:
    (batch_dir / ".part-0.csv.crc").write_bytes(b"crc")
    result = run("put", str(batch_dir), f"{world.uri}/{REL}", "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    folder = world.table.batch_folder(REL)
    objects = {o.name: o.generation for o in world.store.list_objects(folder)}
    assert set(objects) == {f"{folder}part-{i}.csv" for i in range(3)} | {f"{folder}_SUCCESS"}
    success = objects.pop(f"{folder}_SUCCESS")
    assert all(generation < success for generation in objects.values())  # the marker came last
    data = world.store.read(f"{folder}part-1.csv")
    assert data is not None and data.data == b"id,amount\n2,20\n3,30\n"
    assert report["batch"] == f"{world.uri}/{REL}/"
    assert (report["table"], report["rel"]) == ("sales.orders", REL)
    assert report["success"] == {"object": f"{world.uri}/{REL}/_SUCCESS", "generation": success, "size": 0}
    assert [f["object"].rsplit("/", 1)[1] for f in report["files"]] == [
        "part-0.csv",
        "part-1.csv",
        "part-2.csv",
    ]
    assert report["skipped"] == [".part-0.csv.crc"]


def test_text_output(run: Run, world: World, batch_dir: Path) -> None:
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 0, result.output
    assert f"uploaded 3 files (50 bytes) to {world.uri}/{REL}/" in result.stdout
    assert f"wrote {world.uri}/{REL}/_SUCCESS last" in result.stdout


def nothing_under(world: World) -> bool:
    return world.store.list_objects(world.table.batch_folder(REL)) == []


def test_refuses_a_success_file_in_the_folder(run: Run, world: World, batch_dir: Path) -> None:
    (batch_dir / "_SUCCESS").write_text("")
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "is named like the success marker" in one_error_line(result)
    assert nothing_under(world)


def test_refuses_an_empty_folder(run: Run, world: World, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden").write_text("x")
    result = run("put", str(empty), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "holds no data file to upload" in one_error_line(result)
    assert nothing_under(world)


def test_refuses_a_missing_folder_and_subfolders(run: Run, world: World, batch_dir: Path) -> None:
    result = run("put", str(batch_dir / "nope"), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "is not a folder" in one_error_line(result)
    (batch_dir / "nested").mkdir()
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "is a folder" in one_error_line(result)
    assert nothing_under(world)


def test_refuses_a_destination_turnstile_would_reject(run: Run, world: World, batch_dir: Path) -> None:
    result = run("put", str(batch_dir), f"gs://{world.store.bucket}/sales/bad-name/2024")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "would be rejected" in line and "'bad-name' is not allowed" in line
    world.store.write("sales/orders/_config/load.json", b'{"mode": "upsert"}')
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "key 'mode'" in one_error_line(result)
    assert nothing_under(world)


@pytest.mark.parametrize("below", [f"{REL}/_SUCCESS", "2024/_tmp", "_backlog/2024"])
def test_refuses_a_destination_in_a_folder_turnstile_keeps_for_itself(
    run: Run, world: World, batch_dir: Path, below: str
) -> None:
    """Such a `_SUCCESS` would be one of turnstile's own objects, never a batch: not uploaded."""
    result = run("put", str(batch_dir), f"{world.uri}/{below}")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "would never be applied: a batch folder may not be, or sit below, a folder whose name" in line
    if below.endswith("/_SUCCESS"):
        assert f"pass the batch folder: {world.uri}/{REL}" in line
    assert nothing_under(world)


def test_refuses_an_existing_batch_unless_forced(run: Run, world: World, batch_dir: Path) -> None:
    first = world.upload(REL)
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert "already holds objects" in one_error_line(result)
    forced = run("put", str(batch_dir), f"{world.uri}/{REL}", "--force", "-o", "json")
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout)["success"]["generation"] > first


def test_a_nested_table_uploads_spark_partitioned_output_as_written(
    run: Run, world: World, tmp_path: Path
) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"format": "parquet"}')  # nested by default
    out = tmp_path / "spark-out"
    for rel in ["dt=2024-05-01/part-0.parquet", "dt=2024-05-02/part-1.parquet"]:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"PAR1")
    (out / "dt=2024-05-01/.part-0.parquet.crc").write_bytes(b"crc")
    (out / "_SUCCESS").write_text("")  # Spark's own marker: put writes the batch's, last
    result = run("put", str(out), f"{world.uri}/{REL}", "--output", "json")
    assert result.exit_code == 0, result.output
    folder = world.table.batch_folder(REL)
    objects = {o.name: o.generation for o in world.store.list_objects(folder)}
    assert set(objects) == {
        f"{folder}dt=2024-05-01/part-0.parquet",
        f"{folder}dt=2024-05-02/part-1.parquet",
        f"{folder}_SUCCESS",
    }
    success = objects.pop(f"{folder}_SUCCESS")
    assert all(generation < success for generation in objects.values())
    assert sorted(json.loads(result.stdout)["skipped"]) == ["_SUCCESS", "dt=2024-05-01/.part-0.parquet.crc"]


def test_a_sub_folder_refusal_names_the_nested_option(run: Run, world: World, batch_dir: Path) -> None:
    (batch_dir / "dt=2024-05-01").mkdir()
    result = run("put", str(batch_dir), f"{world.uri}/{REL}")
    assert result.exit_code == 2
    assert 'set "nested": true' in one_error_line(result)
    assert nothing_under(world)


def test_refuses_the_root_of_an_ordered_table_whose_batches_sit_in_folders(
    run: Run, world: World, batch_dir: Path
) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.store.write("sales/orders/_bqlock", Lock(position="2024/05/01/13").encode())
    result = run("put", str(batch_dir), world.uri)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "is a batch at the root of ordered table sales.orders" in line
    assert f"{world.uri}/<batch>/" in line
    assert [o.name for o in world.store.list_objects("")] == [
        "sales/orders/_bqlock",
        "sales/orders/_config/ORDERME",
    ]
