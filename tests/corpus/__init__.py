"""Loaders and scorers of the real-world corpus (tests/data/real), for the tests and bench/."""
