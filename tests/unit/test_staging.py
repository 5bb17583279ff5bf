"""Spark's messages name the local copies of a batch's files; the user knows the objects."""

from __future__ import annotations

from turnstile.spark.staging import as_uploaded


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
