"""`turnstile.names.batchfiles`: which objects of a batch folder are its data files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstile.names.batchfiles import (
    GLOB_CHARACTERS,
    data_files,
    data_sub_folders,
    is_data_file,
    is_data_name,
    no_data_files,
    unreadable_files,
    unreadable_reason,
)

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


# ---------------------------------------------------------------- nested batch folders
SPARK_OUTPUT = [
    FOLDER + "._SUCCESS.crc",
    FOLDER + "_SUCCESS",
    FOLDER + "dt=2024-05-01/.part-0.parquet.crc",
    FOLDER + "dt=2024-05-01/part-0.parquet",
    FOLDER + "dt=2024-05-02/hour=13/part-1.parquet",
    FOLDER + "dt=2024-05-02/hour=13/part-1.parquet.crc",
    FOLDER + "_temporary/0/part-2.parquet",
    FOLDER + "dt=2024-05-03/_temporary/part-3.parquet",
    FOLDER + ".hidden/part-4.parquet",
]


def test_nested_takes_every_data_file_at_any_depth_and_skips_what_spark_skips() -> None:
    assert data_files(FOLDER, SPARK_OUTPUT, nested=True) == [
        FOLDER + "dt=2024-05-01/part-0.parquet",
        FOLDER + "dt=2024-05-02/hour=13/part-1.parquet",
    ]
    assert data_files(FOLDER, SPARK_OUTPUT) == []  # not nested: sub-folders are other batches


@pytest.mark.parametrize("name", ["part-0.parquet.crc", "a.crc"])
def test_checksum_files_are_not_data(name: str) -> None:
    assert not is_data_name(name)
    assert not is_data_file(FOLDER, FOLDER + name, nested=True)


def test_nested_still_reads_only_below_the_folder() -> None:
    assert not is_data_file(FOLDER, "ds/tbl/2024/05/02/dt=x/part-0.csv", nested=True)
    assert not is_data_file(FOLDER, "ds/tbl/2024/05/01-x/part-0.csv", nested=True)
    assert is_data_file(FOLDER, FOLDER + "a.csv", nested=True)  # its own files count too


def test_data_sub_folders_are_the_first_level_folders_holding_data() -> None:
    assert data_sub_folders(FOLDER, SPARK_OUTPUT) == ["dt=2024-05-01/", "dt=2024-05-02/"]
    assert data_sub_folders(FOLDER, [FOLDER + "a.csv", FOLDER + "_config/load.json"]) == []


def test_the_no_data_files_message_names_the_sub_folders_and_the_option() -> None:
    uri = f"gs://b/{FOLDER}"
    message = no_data_files(uri, [f"dt={d}/" for d in range(7)], nested=False)
    assert message.startswith(f"{uri} has no data files of its own")
    assert "dt=0/, dt=1/, dt=2/, dt=3/, dt=4/ and 2 more" in message
    assert 'Set "nested": true in its _config/load.json' in message
    plain = no_data_files(uri, [], nested=True)
    assert plain.startswith(f"{uri} has no data files") and "nested" not in plain


@given(st.lists(st.text(alphabet="ab_./", min_size=1, max_size=8), max_size=6))
def test_nested_data_files_are_a_superset_of_the_folders_own(rests: list[str]) -> None:
    names = [FOLDER + rest for rest in rests]
    own = data_files(FOLDER, names)
    nested = data_files(FOLDER, names, nested=True)
    assert set(own) <= set(nested)
    assert all(not any(s.startswith(("_", ".")) for s in n[len(FOLDER) :].split("/")) for n in nested)


def test_a_nested_sub_folder_with_its_own_marker_is_another_batch() -> None:
    day = "ds/tbl/2024/05/01/"
    listing = [
        day + "part-day.parquet",
        day + "_SUCCESS",
        day + "13/part-hour.parquet",
        day + "13/_SUCCESS",
        day + "13/dt=x/part-deep.parquet",
        day + "dt=y/part-1.parquet",
    ]
    assert data_files(day, listing, nested=True) == [day + "part-day.parquet", day + "dt=y/part-1.parquet"]
    assert data_sub_folders(day, listing) == ["dt=y/"]
    renamed = [n.replace("_SUCCESS", "_DONE") for n in listing]
    assert data_files(day, renamed, nested=True, success_filename="_DONE") == [
        day + "part-day.parquet",
        day + "dt=y/part-1.parquet",
    ]
    assert len(data_files(day, renamed, nested=True)) == 4  # another marker name: all are data


# ---------------------------------------------------------------- names Spark cannot read as themselves
@pytest.mark.parametrize(
    "name",
    [
        FOLDER + "part-0.csv",
        FOLDER + "part[0].csv",  # glob characters are read escaped, as themselves
        FOLDER + "part-?.csv",
        FOLDER + "g{h,i}*.csv",
        FOLDER + "part\\0.csv",
        "ds/tbl/2024-05-01T10:00/part-0.csv",  # a ':' in a folder, the path needing no escape
        "ds/tbl/dt=10:00/hour=1/part 0 é#%20.csv",
    ],
)
def test_names_spark_reads_as_themselves(name: str) -> None:
    assert unreadable_reason(name) is None
    assert unreadable_files([f"gs://b/{name}", f"s3://b/{name}"]) is None


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        (FOLDER + "part:0.csv", "rename the file without ':'"),
        (FOLDER + "dt=a:b/part:0.csv", "rename the file without ':'"),
        ("ds/tbl/2024-05-01T10:00/part[0].csv", "rename the folder without ':', or the file without"),
        ("ds/tbl/10:00/x?/part-0.csv", "rename the folder without ':'"),
    ],
)
def test_a_colon_hadoop_would_take_for_a_scheme_is_unreadable(name: str, fix: str) -> None:
    found = unreadable_reason(name)
    assert found is not None and found[1].startswith(fix)


def test_the_refusal_names_the_first_object_how_many_more_and_what_to_do() -> None:
    uris = [
        f"gs://b/{FOLDER}ok.csv",
        f"gs://b/{FOLDER}a:1.csv",
        f"gs://b/{FOLDER}b:2.csv",
        f"gs://b/{FOLDER}c:3.csv",
    ]
    message = unreadable_files(uris)
    assert message is not None
    assert message.startswith(
        f"Spark cannot read the object gs://b/{FOLDER}a:1.csv (and 2 more of the batch's"
    )
    assert "Hadoop takes the ':' in its name for the end of a URI scheme" in message
    assert message.endswith("rename the file without ':', then upload the batch's _SUCCESS again")
    assert "1 more of" in (unreadable_files(uris[:3]) or "")


@given(st.text(alphabet="ab:/[*\\.", max_size=12))
def test_unreadable_exactly_when_hadoop_would_parse_a_scheme(rest: str) -> None:
    name = FOLDER + rest
    globbed = any(c in name for c in GLOB_CHARACTERS)
    expected = ":" in name.rpartition("/")[2] or (":" in name and globbed)
    assert (unreadable_reason(name) is not None) is expected


@pytest.mark.parametrize("nested", [False, True])
def test_the_success_marker_and_the_gate_are_never_data_whatever_their_names(nested: bool) -> None:
    listing = ["t/b/part-0.csv", "t/b/READY", "t/b/HISTORYDONE", "t/b/x/part-1.csv"]
    found = data_files("t/b/", listing, nested=nested, success_filename="READY", gate_filename="HISTORYDONE")
    assert found == ["t/b/part-0.csv", "t/b/x/part-1.csv"] if nested else ["t/b/part-0.csv"]
