"""Object names Hadoop reads as patterns or URIs: each data file is read once, as itself, or the batch
is refused naming the object and what to do.

Spark hands every path to Hadoop's glob. Read unescaped, `part-?.csv` beside `part-1.csv` read
`part-1.csv` twice and `part[0].csv` read `part0.csv` instead of itself, and the batch was still
committed. The same escaped paths go to Spark locally (staged copies keep their names) and on
Dataproc (`gs://` URIs read directly).

A folder's name is also a value in transform.sql (`${rel}`): it is written there as a SQL string
literal, so a name holding a quote, a backslash or a `;` changes no statement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit
from turnstile.config.load_config import LoadConfig
from turnstile.spark import commits, reading
from turnstile.state.records import BatchOutcome

pytestmark = pytest.mark.spark

# Names that are patterns matching one another (and `part0.csv`, `a.csv`...), one row each.
GLOBBY = [
    "part0.csv",
    "part[0].csv",
    "part-1.csv",
    "part-?.csv",
    "*.csv",
    "part{0}.csv",
    "g{h,i}.csv",
    "a\\b.csv",
    "x]y.csv",
    "c}d.csv",
    "part 0 é#%20.csv",
]


def test_each_file_of_a_batch_is_read_once_as_itself(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    files = [(name, f"id\n{i}\n".encode()) for i, name in enumerate(GLOBBY)]
    done = kit.run(kit.batch("1", *files))
    assert done.succeeded, done.error
    assert kit.rows() == [(i,) for i in range(len(GLOBBY))]


def test_glob_characters_in_folders_and_partition_values_are_read_as_themselves(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, nested=True)
    batch = kit.batch(
        "b[1]",
        ("k=a[1]/p?.csv", b"id\n1\n"),
        ("k=a1/p1.csv", b"id\n2\n"),
        ("k=a{1}/*.csv", b"id\n3\n"),
    )
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a[1]"), (2, "a1"), (3, "a{1}")]


def test_a_colon_in_a_folder_is_read_when_the_path_needs_no_escape(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    done = kit.run(kit.batch("2024-05-01T10:00", ("part-0.csv", b"id\n1\n")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1,)]


@pytest.mark.parametrize(
    ("rel", "name", "fix"),
    [
        ("1", "part:0.csv", "rename the file without ':'"),
        ("2024-05-01T10:00", "part[0].csv", "rename the folder without ':', or the file without"),
    ],
)
def test_a_name_hadoop_takes_for_a_uri_fails_the_batch_naming_the_object(
    spark: Any, tmp_path: Path, rel: str, name: str, fix: str
) -> None:
    kit = Kit(spark, tmp_path)
    done = kit.run(kit.batch(rel, ("part-1.csv", b"id\n1\n"), (name, b"id\n2\n")))
    assert not done.succeeded
    assert done.outcomes[rel] is BatchOutcome.FAILED
    uri = f"gs://{BUCKET}/{kit.prefix}/{rel}/{name}"
    assert done.error is not None
    assert done.error.startswith(f"batch {rel!r}: Spark cannot read the object {uri} by its name: ")
    assert f"; {fix}" in done.error
    assert done.error.endswith("then upload the batch's _SUCCESS again")
    assert not (tmp_path / "staged" / BUCKET / kit.prefix / rel).exists()  # refused before staging
    assert not commits.table_exists(spark, kit.table)


@pytest.mark.parametrize(
    "rel", ["x' <> '' OR 1=1 --", "x'; DROP TABLE local.ds.t0; --"], ids=["quote-or", "semicolon"]
)
def test_a_hostile_batch_folder_leaves_the_transform_s_where_as_written(
    spark: Any, tmp_path: Path, rel: str
) -> None:
    kit = Kit(spark, tmp_path)
    kit.transform = "SELECT id, v FROM batch\nWHERE v = 'keep' AND '${rel}' <> 'quarantine'"
    batch = kit.batch(rel, ("part-0.csv", b"id,v\n1,keep\n2,drop\n"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "keep")]  # not `v = 'keep' AND 'x' <> '' OR 1=1`: every row
    [summary] = kit.snapshots()
    assert summary[commits.BATCH_KEY] == f"{rel}#{batch.success_generation}"


FOLDER_TRANSFORM = """
SELECT id,
  ${rel} AS folder,
  '${rel}' AS quoted,
  "folder ${rel}!" AS inside,
  `${rel}` AS named
FROM (SELECT id, id AS `${rel}` FROM batch)
"""


@pytest.mark.parametrize(
    "rel",
    ["x' OR 1=1 --", "a\\b\\t\\u0041\\", 'q"\\"; --', "back`tick */"],
    ids=["quote-or", "backslashes", "double-quote", "backtick"],
)
def test_a_batch_folder_is_the_same_value_wherever_its_placeholder_stands(
    spark: Any, tmp_path: Path, rel: str
) -> None:
    kit = Kit(spark, tmp_path)
    kit.transform = FOLDER_TRANSFORM
    done = kit.run(kit.batch(rel, ("part-0.csv", b"id\n1\n")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, rel, rel, f"folder {rel}!", 1)]


# --- reading.py on local paths: what Hadoop's glob does with the escaped names -----------------------
def write(folder: Path, names: list[str], suffix: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        (folder / name).write_text(f"id\n{i}\n" if not suffix else f'{{"id": {i}{suffix}}}\n')
    return [folder / name for name in names]


def test_read_takes_each_local_path_as_that_file_and_nothing_else(spark: Any, tmp_path: Path) -> None:
    paths = write(tmp_path / "in[1]", GLOBBY)
    load = LoadConfig.model_validate({"format": "csv"})
    for i, path in enumerate(paths):
        read = reading.read(spark, [str(path)], load)
        try:
            assert [row["id"] for row in read.rows.collect()] == [i], path.name  # its own row only
        finally:
            read.release()


def test_the_unknown_field_check_reads_each_json_file_as_itself(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "json"
    write(folder, ["a.json"], suffix=', "extra": 1')  # matched by `?.json`, not in the batch
    [clean] = write(folder, ["?.json"], suffix=" ")
    load = LoadConfig.model_validate({"format": "json", "schema": "id INT"})
    assert reading.unknown_fields(spark, [str(clean)], load) == []
    assert reading.unknown_fields(spark, [str(folder / "a.json")], load) == ["extra"]
