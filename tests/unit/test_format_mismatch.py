"""Data files whose extension names another format than the config's are refused, not misread."""

from __future__ import annotations

import pytest

from turnstile.names.batchfiles import format_mismatch

B = "gs://b/ds/t/01/"


def test_parquet_files_under_the_default_csv_format_are_refused_naming_the_format_to_set() -> None:
    why = format_mismatch([f"{B}part-0.parquet", f"{B}part-1.snappy.parquet"], "csv")
    assert why is not None
    assert why.startswith(f"its files are parquet ({B}part-0.parquet) but load.json's format is 'csv'")
    assert why.endswith('set "format": "parquet" in the table\'s _config/load.json')


@pytest.mark.parametrize(
    ("names", "format_"),
    [
        (["a.csv", "b.csv.gz"], "csv"),
        (["a.json"], "jsonl"),
        (["a.jsonl"], "json"),
        (["a.parquet"], "parquet"),
        (["a.dat", "b.csv"], "csv"),  # an unknown extension: nothing to go by
        (["part-00000"], "csv"),
        (["a.json"], "text"),  # text reads any file as lines
    ],
)
def test_files_that_fit_or_say_nothing_pass(names: list[str], format_: str) -> None:
    assert format_mismatch([B + n for n in names], format_) is None


def test_compressed_json_under_csv_is_refused() -> None:
    assert format_mismatch([f"{B}a.json.gz"], "csv") is not None


@pytest.mark.parametrize(
    ("names", "format_", "named"),
    [
        (["a.json", "b.csv"], "csv", "a.json"),
        (["a.csv", "b.json", "c.csv"], "csv", "b.json"),
        (["a.dat", "b.parquet"], "csv", "b.parquet"),
        (["a.jsonl", "b.csv.gz"], "json", "b.csv.gz"),
    ],
)
def test_a_file_of_another_format_among_the_batchs_files_is_refused_naming_it(
    names: list[str], format_: str, named: str
) -> None:
    """Read in the config's format, a `.json` line among CSV files became the header and its record
    was lost, with the batch committed."""
    why = format_mismatch([B + n for n in names], format_)
    assert why is not None
    assert why.startswith(f"its file {B}{named} is ")
    assert f"load.json's format is {format_!r}" in why and "move the file out of the batch folder" in why
