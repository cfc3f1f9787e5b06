"""Benchmarks reproducing the seeds' tables (not run by CI)."""
