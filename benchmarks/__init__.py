"""Benchmarks reproducing the papers' tables (not run by CI)."""
