"""Benchmark suites: each module registers one suite with ``register_suite``."""
