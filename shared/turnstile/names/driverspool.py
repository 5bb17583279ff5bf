"""Names of the warm drivers' spool in the bucket (`placement.DRIVER_SPOOL`, `_turnstile/driver/`).
Pure: names only; `turnstile.state.spoolrecords` says what each object holds.

- `requests/<submitted, µs>-<job>.json`: one request per job, so that names sort in submission order;
- `jobs/<job>/submitted.json`, `started.json`, `finished.json`: what a job's runner reads;
- `drivers/<driver>.json`: one record per driver;
- `rejected/<request name>`: what a driver found in a request object it could not read;
- `sequence.json`: the number of the deployment's last driver launch (compare-and-swap);
- `history.json`: the stay-up policy's history, handed from a driver to its successor.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from turnstile.names.placement import DRIVER_SPOOL

REQUESTS = f"{DRIVER_SPOOL}requests/"
DRIVERS = f"{DRIVER_SPOOL}drivers/"
JOBS = f"{DRIVER_SPOOL}jobs/"
REJECTED = f"{DRIVER_SPOOL}rejected/"
SEQUENCE = f"{DRIVER_SPOOL}sequence.json"
HISTORY = f"{DRIVER_SPOOL}history.json"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def checked_id(kind: str, value: str) -> str:
    """A job or driver id as it may appear in an object name: 1-128 letters, digits, `.`, `_`, `-`."""
    if not _ID.fullmatch(value):
        raise ValueError(
            f"{kind} id {value!r} cannot name a spool object: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def request_name(submitted_at: datetime, job_id: str) -> str:
    micros = (submitted_at - _EPOCH) // timedelta(microseconds=1)
    return f"{REQUESTS}{micros:020d}-{checked_id('job', job_id)}.json"


def submitted_at(name: str) -> datetime | None:
    """When a request was submitted, from its name; None for a name the spool did not make."""
    stamp = name.removeprefix(REQUESTS).partition("-")[0]
    return _EPOCH + timedelta(microseconds=int(stamp)) if job_of(name) is not None else None


def job_of(name: str) -> str | None:
    """The job id a request's name carries, or None for a name the spool did not make."""
    base = name.removeprefix(REQUESTS)
    stamp, dash, rest = base.partition("-")
    if not (dash and stamp.isdigit() and rest.endswith(".json")):
        return None
    job = rest.removesuffix(".json")
    return job if _ID.fullmatch(job) else None


def submitted_name(job_id: str) -> str:
    return f"{JOBS}{checked_id('job', job_id)}/submitted.json"


def started_name(job_id: str) -> str:
    return f"{JOBS}{checked_id('job', job_id)}/started.json"


def finished_name(job_id: str) -> str:
    return f"{JOBS}{checked_id('job', job_id)}/finished.json"


def stop_name(job_id: str) -> str:
    """A cancel's request that the driver running the job stop it at its next batch boundary."""
    return f"{JOBS}{checked_id('job', job_id)}/stop.json"


def driver_name(driver_id: str) -> str:
    return f"{DRIVERS}{checked_id('driver', driver_id)}.json"


def rejected_name(request: str) -> str:
    return f"{REJECTED}{request.rpartition('/')[2]}"
