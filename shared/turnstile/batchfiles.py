"""Which objects of a batch folder are its data files: the one rule every reader of a batch uses.

A batch is the files directly in its folder. Names starting with `_` are markers and turnstile's
own objects (`_SUCCESS`, `_config/`, `_backlog/`), names starting with `.` are hidden files
(editor and OS leftovers); neither is data, and sub-folders are other batches. Pure: no storage.
"""

from __future__ import annotations

from collections.abc import Iterable


def is_data_name(base: str) -> bool:
    """True when a file called `base` (no folder) holds data rather than a marker or hidden file."""
    return bool(base) and not base.startswith(("_", "."))


def is_data_file(batch_folder: str, name: str) -> bool:
    """True when the object `name` is a data file of the batch in `batch_folder` (with its
    trailing slash): directly in that folder, with a data name."""
    if not name.startswith(batch_folder):
        return False
    rest = name[len(batch_folder) :]
    return "/" not in rest and is_data_name(rest)


def data_files(batch_folder: str, names: Iterable[str]) -> list[str]:
    """The data files among `names` (a listing of the folder), in the listing's order."""
    return [name for name in names if is_data_file(batch_folder, name)]
