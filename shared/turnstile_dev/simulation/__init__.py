"""Deterministic simulation of the protocol under duplicated, reordered and failing events."""
