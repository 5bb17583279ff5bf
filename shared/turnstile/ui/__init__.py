"""The operator console (`turnstile ui`): a local web page over the bucket, read with the operator's
own credentials, acting through the ops layer the CLI commands use.

`context` what it works with (injected by `cli/console.py`), `security` the token and the checks
every request passes, `pages` what each page shows, `actions` what each action will do and doing
it, `graph` and `timeline` where the drawings go, `app` the routes, `serve` the server on 127.0.0.1.
"""
