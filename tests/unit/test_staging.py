"""How Spark is told a batch's files (each as itself), and its messages naming them: the user knows
the objects, not the local copies."""

from __future__ import annotations

import pytest

from turnstile.spark.staging import as_uploaded, literal


def test_each_local_copy_spark_names_becomes_the_uploaded_objects_uri() -> None:
    uris = ["gs://b/ds/t/01/a.csv", "gs://b/ds/t/01/b.csv"]
    paths = ["/tmp/staged/b/ds/t/01/a.csv", "/tmp/staged/b/ds/t/01/b.csv"]
    text = "header wrong. CSV file: file:///tmp/staged/b/ds/t/01/b.csv; also file:/tmp/staged/b/ds/t/01/a.csv"
    assert as_uploaded(text, uris, paths) == (
        "header wrong. CSV file: gs://b/ds/t/01/b.csv; also gs://b/ds/t/01/a.csv"
    )


def test_paths_spark_reads_directly_are_left_as_they_are() -> None:
    uris = ["gs://b/ds/t/01/a.csv"]
    assert as_uploaded("bad file gs://b/ds/t/01/a.csv", uris, uris) == "bad file gs://b/ds/t/01/a.csv"


@pytest.mark.parametrize(
    ("path", "read_as"),
    [
        ("/s/b/t/1/part-0.csv", "/s/b/t/1/part-0.csv"),
        ("/s/b/t/1/part-?.csv", "/s/b/t/1/part-\\?.csv"),
        ("gs://b/t/1/*.csv", "gs://b/t/1/\\*.csv"),
        ("gs://b/t/[1]/p{0,1}.csv", "gs://b/t/\\[1\\]/p\\{0,1\\}.csv"),
        ("s3://b/t/1/a\\b.csv", "s3://b/t/1/a\\\\b.csv"),
        ("/s/b/t/dt=1:0/p é#%20.csv", "/s/b/t/dt=1:0/p é#%20.csv"),
    ],
)
def test_literal_escapes_each_glob_character_and_nothing_else(path: str, read_as: str) -> None:
    assert literal(path) == read_as


def test_the_escaped_path_spark_names_becomes_the_uploaded_objects_uri() -> None:
    uris = ["gs://b/ds/t/01/part[0].csv"]
    local = ["/tmp/staged/b/ds/t/01/part[0].csv"]
    text = "Path does not exist: file:/tmp/staged/b/ds/t/01/part\\[0\\].csv"
    assert as_uploaded(text, uris, local) == "Path does not exist: gs://b/ds/t/01/part[0].csv"
    direct = "Path does not exist: gs://b/ds/t/01/part\\[0\\].csv"
    assert as_uploaded(direct, uris, uris) == "Path does not exist: gs://b/ds/t/01/part[0].csv"
