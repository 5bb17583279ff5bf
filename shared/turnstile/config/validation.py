"""Turn pydantic's validation errors into one line per problem that names key, value and rule."""

from __future__ import annotations

from pydantic import ValidationError

from turnstile.names import legacy


def explain(error: ValidationError) -> list[str]:
    """One sentence per failed field: `key 'mode': got 'upsert'; Input should be 'append' or ...`."""
    lines = []
    for problem in error.errors(include_url=False):
        key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"])
        key = key.removeprefix(".")  # `mapping[2].cast.type`: list positions as indexes
        if not key:
            lines.append(problem["msg"].removeprefix("Value error, "))
        elif problem["type"] == "extra_forbidden":
            hint = legacy.LOAD_KEYS.get(key)
            known = f"; it is gcs_ocn_bq_ingest's: {hint}" if hint else ""
            lines.append(f"key '{key}' is not a known key (got {problem['input']!r}){known}")
        elif key == "schema" and not isinstance(problem["input"], str):
            lines.append(f"key 'schema': got {problem['input']!r}; {legacy.SCHEMA_AS_FIELDS}")
        elif problem["type"] == "missing":
            lines.append(f"key '{key}' is required")
        else:
            message = problem["msg"].removeprefix("Value error, ")
            lines.append(f"key '{key}': got {problem['input']!r}; {message}")
    return lines
