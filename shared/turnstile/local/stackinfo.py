"""`<home>/stack.json`: where a running local stack can be reached, for every other command."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

STACK_FILE = "stack.json"


@dataclass(frozen=True)
class StackInfo:
    home: str  # absolute path of the stack's home folder
    storage_url: str  # fake-gcs-server, e.g. http://127.0.0.1:4443 (STORAGE_EMULATOR_HOST)
    function_url: str  # the function host (functions-framework) receiving CloudEvents
    bucket: str  # the bucket the stack created and watches
    warehouse: str  # the local Iceberg warehouse folder
    catalog: str  # the Spark catalog name of the warehouse
    pid: int  # the `turnstile up` process

    def save(self) -> None:
        path = Path(self.home) / STACK_FILE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(self), indent=1))
        partial.replace(path)


def load(home: Path) -> StackInfo | None:
    """The stack recorded under `home`, or None when none was started there."""
    try:
        return StackInfo(**json.loads((home / STACK_FILE).read_text()))
    except FileNotFoundError:
        return None
