"""Side-by-side speed benchmarks: ``make bench`` (see README.md in this folder)."""
