"""What the machine can do, and how long the service takes to start."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.measure import Figure

_START = (
    "import time; started = time.perf_counter()\n"
    "from backend.backends.local import InProcessBackend\n"
    "InProcessBackend(profile={profile!r}).warmup()\n"
    "print(time.perf_counter() - started)\n"
)


def cpu_name() -> str:
    """The CPU's model name (Linux), which decides the engines' speed and the judge's reader."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def memory_read_bandwidth(repeats: int = 7, gib: float = 1.0) -> float:
    """GB/s reading a large float32 array with all threads (torch sum), median of runs."""
    import torch

    data = torch.ones(int(gib * (1 << 30)) // 4, dtype=torch.float32)
    data.sum()  # touch every page first
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        data.sum()
        seconds.append(time.perf_counter() - started)
    return data.numel() * 4 / statistics.median(seconds) / 1e9


def start_time(profile: str, cache_dir: str | None) -> float:
    """Seconds from a fresh interpreter to both models loaded (cold: an empty cache folder)."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["CORE_CACHE_DIR"] = cache_dir
    output = subprocess.run(
        [sys.executable, "-c", _START.format(profile=profile)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.strip().splitlines()[-1])


def start_figures(profile: str) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="core-bench-cache-") as empty_cache:
        cold = start_time(profile, empty_cache)
    warm = start_time(profile, None)
    return [
        Figure(
            "start_cold",
            "s",
            None,
            cold,
            "report",
            "empty cache: assemble the GGUF, build the tokenizer, convert e5, load",
        ),
        Figure("start_warm", "s", None, warm, "report", "cache filled: load both models"),
    ]


def bandwidth_figure(bandwidth_gbs: float, weight_bytes: int, decode_rate: float) -> Figure:
    """The share of the read bandwidth one decoding stream uses (all weights read per token)."""
    used = weight_bytes * decode_rate / 1e9
    return Figure(
        "decode_bandwidth_fraction",
        "GB/s",
        bandwidth_gbs,
        used,
        "report",
        f"{weight_bytes / 1e9:.2f} GB of weights x {decode_rate:.1f} tokens/s vs measured read "
        "bandwidth (ratio = fraction reached)",
    )
