"""The names of result records: `<table>/_turnstile/results/<rel>/<generation>.json`, one per batch,
and `<generation>.reprocess-<request id>.json` beside it for each operator's reprocess."""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.paths import Table

REPROCESS = ".reprocess-"
# How the FAILED record of a batch an operator dropped (`unlock --skip-head`, `skip`) begins its error.
DROPPED = "dropped by an operator"
DROPPED_OUTCOME = "DROPPED"  # what `status` and `history` show for it: no failure to fix


@dataclass(frozen=True)
class RecordName:
    rel: str
    generation: int  # of the batch's `_SUCCESS`
    request: str  # the reprocess request's id; "" for the batch's own record


def read_name(table: Table, name: str) -> RecordName | None:
    """What a result record's object name says; None for any other object under `results/`."""
    return _read(f"{table.internal}results/", name)


def read_failure_name(table: Table, name: str) -> RecordName | None:
    """What the name of an unordered batch's failure record (`failures/<rel>/<generation>.json`)
    says; None for any other object under `failures/`."""
    found = _read(table.failures, name)
    return found if found is not None and not found.request else None


def _read(root: str, name: str) -> RecordName | None:
    if not name.startswith(root) or not name.endswith(".json"):
        return None
    rel, _, base = name[len(root) :].rpartition("/")
    stem, _, request = base.removesuffix(".json").partition(REPROCESS)
    return RecordName(rel, int(stem), request) if stem.isdigit() else None
