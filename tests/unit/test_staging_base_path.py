"""`turnstile.spark.staging.base_path`: where Spark finds a batch folder, for partition discovery."""

from __future__ import annotations

from turnstile.spark.staging import base_path

FOLDER = "gs://b/ds/tbl/2024/05/01/"
URIS = [FOLDER + "dt=2024-05-01/part-0.parquet", FOLDER + "part-1.parquet"]


def test_on_dataproc_the_base_is_the_folder_uri_itself() -> None:
    assert base_path(FOLDER, URIS, URIS) == FOLDER.rstrip("/")


def test_locally_the_base_is_the_staged_copy_of_the_folder() -> None:
    staged = [
        "/tmp/staged/b/ds/tbl/2024/05/01/dt=2024-05-01/part-0.parquet",
        "/tmp/staged/b/ds/tbl/2024/05/01/part-1.parquet",
    ]
    assert base_path(FOLDER, URIS, staged) == "/tmp/staged/b/ds/tbl/2024/05/01"


def test_no_base_when_the_staging_renames_the_files() -> None:
    assert base_path(FOLDER, URIS, ["/x/0", "/x/1"]) is None
    assert base_path(FOLDER, ["gs://other/x.parquet"], ["/x.parquet"]) is None
