"""The two ways an operator command stops early, each with its exit code.

Messages follow the CLI's rule: `<what went wrong>; <what to do>`, on one line.
"""

from __future__ import annotations

from turnstile.core.errors import TurnstileError

EXIT_OK = 0
EXIT_PROBLEMS = 1  # the command ran and found problems, or failed on the way
EXIT_USAGE = 2  # the command was not run: bad arguments, bad settings, or refused


class Refused(TurnstileError):
    """The command was not run as asked (exit 2): nothing was changed."""


class Failed(TurnstileError):
    """The command could not complete (exit 1)."""
