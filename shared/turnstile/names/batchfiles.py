"""Which objects of a batch folder are its data files: the one rule every reader of a batch uses.

A batch is the data files under its folder: only those directly in it, or, with the `nested`
option, those at any depth (what Spark and Hive writers produce: `dt=2024-05-01/part-0.parquet`)
except inside a sub-folder that holds its own success marker (another batch).
As Spark does, names starting with `_` (markers and turnstile's own objects: `_SUCCESS`,
`_config/`, `_backlog/`, `_temporary/`) or `.` (hidden files) and checksum side files (`.crc`)
are never data, and neither is anything inside a folder so named. A data file whose name Spark
cannot read as itself is refused (`unreadable_files`), never skipped. Pure: no storage.
"""

from __future__ import annotations

from collections.abc import Iterable

SIDE_FILE_SUFFIXES = (".crc",)
GLOB_CHARACTERS = "\\[]{}*?"  # what Hadoop's glob gives a meaning to; Spark reads them escaped
SUCCESS = "_SUCCESS"  # the default SUCCESS_FILENAME; callers pass the setting
NESTED_OPTION = '"nested": true'


def is_data_name(base: str) -> bool:
    """True when a file or folder called `base` (one path segment) may hold data rather than a
    marker, a hidden file or a checksum."""
    return bool(base) and not base.startswith(("_", ".")) and not base.endswith(SIDE_FILE_SUFFIXES)


def is_data_file(batch_folder: str, name: str, *, nested: bool = False) -> bool:
    """True when the object `name` is a data file of the batch in `batch_folder` (with its
    trailing slash): directly in that folder, or with `nested` at any depth below it, every
    segment of its path with a data name."""
    if not name.startswith(batch_folder):
        return False
    segments = name[len(batch_folder) :].split("/")
    if len(segments) > 1 and not nested:
        return False
    return all(is_data_name(segment) for segment in segments)


def data_files(
    batch_folder: str,
    names: Iterable[str],
    *,
    nested: bool = False,
    success_filename: str = SUCCESS,
    gate_filename: str | None = None,
) -> list[str]:
    """The data files among `names` (a listing of the folder), in the listing's order. With
    `nested`, a sub-folder holding its own `success_filename` is another batch, not part of this
    one (the default layout lets a day's batch folder hold its hours' batch folders). The success
    marker and the gate file are never data, even when their names do not start with `_` (as the
    original loader skipped its action files): `READY` holding a row count is not a row."""
    markers = {success_filename, gate_filename}
    every = list(names)
    listed = [name for name in every if name.rpartition("/")[2] not in markers]
    if not nested:
        return [name for name in listed if is_data_file(batch_folder, name)]
    other_batches = {
        name[: -len(success_filename)]
        for name in every
        if name.startswith(batch_folder)
        and name.endswith(f"/{success_filename}")
        and name != batch_folder + success_filename
    }
    return [
        name
        for name in listed
        if is_data_file(batch_folder, name, nested=True) and not _inside(name, batch_folder, other_batches)
    ]


def _inside(name: str, batch_folder: str, folders: set[str]) -> bool:
    """True when `name` lies in one of `folders` below `batch_folder`."""
    if not folders:
        return False
    segments = name[len(batch_folder) :].split("/")[:-1]
    return any(batch_folder + "/".join(segments[: i + 1]) + "/" in folders for i in range(len(segments)))


def data_sub_folders(
    batch_folder: str, names: Iterable[str], *, success_filename: str = SUCCESS
) -> list[str]:
    """The sub-folders directly below `batch_folder` that hold data files of this batch at some
    depth (each with its trailing slash, sorted): where a batch's data is when it has no files of
    its own."""
    found = {
        name[len(batch_folder) :].split("/")[0] + "/"
        for name in data_files(batch_folder, names, nested=True, success_filename=success_filename)
        if "/" in name[len(batch_folder) :]
    }
    return sorted(found)


def unread_sub_folders(
    batch_folder_uri: str, batch_folder: str, names: Iterable[str], *, success_filename: str
) -> str | None:
    """For a batch of a text format whose config leaves `nested` unset: why it cannot be applied
    as it is when data files also sit in its sub-folders (not batches of their own). Reading only
    its own files would drop those without a word, where the original loader read them; None when
    there are none."""
    listed = list(names)
    sub_folders = data_sub_folders(batch_folder, listed, success_filename=success_filename)
    if not sub_folders:
        return None
    if not data_files(batch_folder, listed, success_filename=success_filename):
        return no_data_files(batch_folder_uri, sub_folders, nested=False)
    shown = ", ".join(sub_folders[:5]) + (f" and {len(sub_folders) - 5} more" if len(sub_folders) > 5 else "")
    return (
        f"{batch_folder_uri} also has data files in the sub-folders {shown}, which a batch of this format "
        f'reads only with {NESTED_OPTION}: set "nested" in its _config/load.json, true to load them '
        "(as gcs_ocn_bq_ingest did) or false to leave them out"
    )


def no_data_files(batch_folder_uri: str, sub_folders: list[str], *, nested: bool) -> str:
    """Why a batch has nothing to load, and what to do: names the sub-folders holding its data
    when it has none of its own files and `nested` is off."""
    if sub_folders and not nested:
        shown = ", ".join(sub_folders[:5]) + (
            f" and {len(sub_folders) - 5} more" if len(sub_folders) > 5 else ""
        )
        return (
            f"{batch_folder_uri} has no data files of its own; its data is in the sub-folders {shown}. "
            f"Set {NESTED_OPTION} in its _config/load.json to load every file under the batch "
            "folder (key=value folders become columns)"
        )
    return (
        f"{batch_folder_uri} has no data files (names starting with _ or . and .crc files are not "
        "data); upload the batch's files before its _SUCCESS"
    )


def unreadable_reason(name: str) -> tuple[str, str] | None:
    """(why, what to do) when Spark cannot read the object `name` (its path in the bucket) as
    itself, None when it can. Hadoop parses a path segment holding ':' as a URI with a scheme: a
    file name with one is never read as itself, nor is a path whose glob characters must be escaped
    (Hadoop then resolves it folder by folder) while a folder of it holds a ':'."""
    if ":" in name.rpartition("/")[2]:
        return "Hadoop takes the ':' in its name for the end of a URI scheme", "rename the file without ':'"
    if ":" in name and any(c in name for c in GLOB_CHARACTERS):
        return (
            "Hadoop takes the ':' in a folder of its path for the end of a URI scheme, as the path also "
            f"holds one of {' '.join(GLOB_CHARACTERS)}",
            "rename the folder without ':', or the file without those characters",
        )
    return None


def unreadable_files(uris: Iterable[str]) -> str | None:
    """Why a batch cannot be read, naming the first of its data files (gs:// or s3:// URIs) whose
    name Spark cannot read as itself and what to do; None when there is none."""
    found = [(uri, reason) for uri in uris if (reason := unreadable_reason(_object_name(uri)))]
    if not found:
        return None
    (uri, (why, fix)), more = found[0], len(found) - 1
    others = f" (and {more} more of the batch's objects)" if more else ""
    return (
        f"Spark cannot read the object {uri}{others} by its name: {why}; {fix}, then upload the "
        "batch's _SUCCESS again"
    )


def _object_name(uri: str) -> str:
    """`gs://bucket/a/b.csv` -> `a/b.csv`."""
    return uri.partition("://")[2].partition("/")[2]


# File extensions that name a format (compressed text keeps its own: `.csv.gz` is csv).
FORMAT_OF_EXTENSION = {
    ".parquet": "parquet",
    ".orc": "orc",
    ".avro": "avro",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_SAME = {"jsonl": "json"}  # formats that are one reader


def format_mismatch(uris: Iterable[str], format_: str) -> str | None:
    """When a data file's extension names another format than the config's (parquet files read as
    the default `csv` would load their bytes as rows; a `.json` file among `.csv` ones would give its
    line as the header): why, and what to set or move; else None. Files without a known extension
    say nothing; `text` reads any file as lines."""
    if format_ == "text":
        return None
    named = [(uri, FORMAT_OF_EXTENSION.get(_extension(uri))) for uri in uris]
    foreign = [(uri, found) for uri, found in named if found not in (None, _SAME.get(format_, format_))]
    if not foreign:
        return None
    (first, found), others = foreign[0], len(foreign) - 1
    if len(foreign) == len(named) and {kind for _, kind in foreign} == {found}:
        return (
            f"its files are {found} ({first}) but load.json's format is {format_!r}: reading them as "
            f'{format_} would load their bytes as rows; set "format": "{found}" in the table\'s '
            "_config/load.json"
        )
    more = f" (and {others} more file(s) of another format)" if others else ""
    return (
        f"its file {first}{more} is {found}, but load.json's format is {format_!r} and a batch is read "
        f"in one format: read as {format_}, its rows would be lost or misread; move the file out of "
        "the batch folder (a batch of its own, in a table of that format), then upload the batch's "
        "_SUCCESS again"
    )


def _extension(uri: str) -> str:
    base = uri.rpartition("/")[2].lower()
    for compressed in (".gz", ".bz2", ".deflate", ".snappy", ".zst", ".lz4"):
        base = base.removesuffix(compressed)
    dot = base.rfind(".")
    return base[dot:] if dot > 0 else ""


def unread_data_like(batch_folder: str, names: Iterable[str]) -> list[str]:
    """Files directly in the batch folder that a data extension names but a `_` or `.` at the start
    keeps out of the batch (`_part-1.csv`): gcs_ocn_bq_ingest loaded them, turnstile never does."""
    found = []
    for name in names:
        base = name[len(batch_folder) :] if name.startswith(batch_folder) else ""
        if base and "/" not in base and not is_data_name(base) and _extension(base) in FORMAT_OF_EXTENSION:
            found.append(name)
    return found
