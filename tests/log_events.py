"""The events the library logs, found in its source: what each cloud's alerts must cover."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Events that need a human although logged at WARNING: a count over a window is the signal.
WARNING_EVENTS_ALERTED = {"subscriber_restarted", "job_retry_scheduled", "batch_reconciled"}
# Logged only by the local stack (turnstile.local), which has no Cloud Logging to alert from.
LOCAL_ONLY = ROOT / "shared" / "turnstile" / "local"
LOG_SOURCES = [ROOT / "shared" / "turnstile", ROOT / "functions"]
# Logged only by AWS's adapters, which a Google Cloud deployment never runs.
AWS_ONLY = {ROOT / "shared" / "turnstile" / "store" / "s3.py"}


def _event_of(extra: ast.expr) -> str | None:
    """The constant "event" of an `extra=` argument: a dict, or a dict merged with `|`."""
    if isinstance(extra, ast.BinOp):
        return _event_of(extra.left) or _event_of(extra.right)
    if isinstance(extra, ast.Dict):
        for key, value in zip(extra.keys, extra.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "event" and isinstance(value, ast.Constant):
                return str(value.value)
    return None


def logged_events(levels: set[str], roots: list[Path] = LOG_SOURCES) -> dict[str, set[Path]]:
    """Every `event` logged with `log.<level>(..., extra={"event": ...})` under `roots`, with the
    files that log it."""
    found: dict[str, set[Path]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if node.func.attr not in levels:
                    continue
                for keyword in node.keywords:
                    event = _event_of(keyword.value) if keyword.arg == "extra" else None
                    if event:
                        found.setdefault(event, set()).add(path)
    return found


def errors_to_alert(*, on_google: bool = False) -> set[str]:
    """Events logged at ERROR or CRITICAL outside the local stack (`on_google`: and outside AWS's
    adapters): each needs an alert."""
    logged = logged_events({"error", "critical", "exception"})
    return {
        event
        for event, paths in logged.items()
        if not all(p.is_relative_to(LOCAL_ONLY) for p in paths) and not (on_google and paths <= AWS_ONLY)
    }
