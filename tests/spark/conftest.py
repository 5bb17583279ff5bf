"""Spark fixtures live in tests/conftest.py: the end-to-end tests share the same session."""
