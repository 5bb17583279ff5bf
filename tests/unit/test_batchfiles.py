"""`turnstile.batchfiles`: which objects of a batch folder are its data files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstile.batchfiles import data_files, is_data_file, is_data_name

FOLDER = "ds/tbl/2024/05/01/"


@pytest.mark.parametrize("name", ["part-0.csv", "a.parquet", "data.json.gz", "x", "file_with_underscore"])
def test_ordinary_names_are_data(name: str) -> None:
    assert is_data_name(name)
    assert is_data_file(FOLDER, FOLDER + name)


@pytest.mark.parametrize("name", ["_SUCCESS", "_BACKFILL", "_bqlock", ".DS_Store", ".part-0.csv.crc", ""])
def test_markers_hidden_files_and_the_folder_itself_are_not_data(name: str) -> None:
    assert not is_data_name(name)
    assert not is_data_file(FOLDER, FOLDER + name)


@pytest.mark.parametrize(
    "name",
    [
        FOLDER + "13/part-0.csv",  # a sub-folder is another batch
        FOLDER + "_config/load.json",
        FOLDER + "_failed/bad-rows-1.jsonl",
        "ds/tbl/2024/05/02/part-0.csv",  # a sibling batch
        "ds/tbl/2024/05/01-part-0.csv",  # shares the prefix without the slash
    ],
)
def test_objects_outside_the_folder_or_below_it_are_not_its_data(name: str) -> None:
    assert not is_data_file(FOLDER, name)


def test_data_files_keeps_the_listing_order() -> None:
    listing = [
        FOLDER + "_SUCCESS",
        FOLDER + "b.csv",
        FOLDER + ".hidden",
        FOLDER + "a.csv",
        FOLDER + "sub/c.csv",
    ]
    assert data_files(FOLDER, listing) == [FOLDER + "b.csv", FOLDER + "a.csv"]


@given(st.text(alphabet="ab_./", max_size=12))
def test_a_data_file_is_exactly_a_data_name_directly_in_the_folder(rest: str) -> None:
    expected = "/" not in rest and rest != "" and rest[0] not in "_."
    assert is_data_file(FOLDER, FOLDER + rest) is expected
