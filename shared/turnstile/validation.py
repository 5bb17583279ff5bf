"""Turn pydantic's validation errors into one line per problem that names key, value and rule."""

from __future__ import annotations

from pydantic import ValidationError


def explain(error: ValidationError) -> list[str]:
    """One sentence per failed field: `key 'mode': got 'upsert'; Input should be 'append' or ...`."""
    lines = []
    for problem in error.errors(include_url=False):
        key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"])
        key = key.removeprefix(".")  # `mapping[2].cast.type`: list positions as indexes
        if not key:
            lines.append(problem["msg"].removeprefix("Value error, "))
        elif problem["type"] == "extra_forbidden":
            lines.append(f"key '{key}' is not a known key (got {problem['input']!r})")
        elif problem["type"] == "missing":
            lines.append(f"key '{key}' is required")
        else:
            message = problem["msg"].removeprefix("Value error, ")
            lines.append(f"key '{key}': got {problem['input']!r}; {message}")
    return lines
