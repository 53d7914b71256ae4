"""Agent tasks through real agent loops (issue 50): ``python -m benchmarks.agents``."""
