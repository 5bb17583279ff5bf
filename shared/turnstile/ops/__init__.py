"""The operator commands' logic, apart from argument parsing and printing (`turnstile.cli`).

Each module takes an `ObjectStore` (or an `Invocation`) and settings and returns plain values the
CLI renders as text or JSON; none of them imports pyspark except `query`, and only when run.
"""
