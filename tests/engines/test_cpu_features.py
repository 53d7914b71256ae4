"""The CPU probes and what follows from them: the real probes read what the CPU reports
(``/proc/cpuinfo``), and each choice that depends on them is tested with the probe forced
each way, so that no test asserts what this machine happens to have."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from backend.engines import torch_placement

CPUINFO = Path("/proc/cpuinfo")


def _cpu_flags() -> set[str]:
    for line in CPUINFO.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("/proc/cpuinfo lists no flags")


@pytest.mark.skipif(not CPUINFO.exists(), reason="needs Linux's /proc/cpuinfo")
def test_the_probes_read_what_the_cpu_reports():
    flags = _cpu_flags()
    assert torch_placement.cpu_has_amx() == ("amx_tile" in flags)
    native = "avx512_bf16" in flags or "amx_tile" in flags
    assert torch_placement.cpu_has_native_bf16() == native


@pytest.mark.parametrize(("native", "expected"), [(True, torch.bfloat16), (False, torch.float32)])
def test_a_cpu_computes_in_bf16_only_where_it_does_so_natively(monkeypatch, native, expected):
    monkeypatch.setattr(torch_placement, "cpu_has_native_bf16", lambda: native)
    assert torch_placement.resolve_dtype(None, "cpu") == expected
    assert torch_placement.resolve_dtype("auto", "cpu") == expected


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(
    ("name", "expected"), [("float32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_a_named_dtype_wins_over_the_probe(monkeypatch, native, name, expected):
    monkeypatch.setattr(torch_placement, "cpu_has_native_bf16", lambda: native)
    assert torch_placement.resolve_dtype(name, "cpu") == expected


def test_an_unknown_dtype_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="auto, bfloat16, float16, float32"):
        torch_placement.resolve_dtype("int3", "cpu")
