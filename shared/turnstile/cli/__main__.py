"""`python -m turnstile.cli`: the same as the `turnstile` command."""

from turnstile.cli import main

main()
