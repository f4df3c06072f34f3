"""Benchmarks of MemBrain; run each from the repository root as ``python -m benchmarks.<name>``."""
