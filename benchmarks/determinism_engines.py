"""What the same-answer replay (``benchmarks.determinism``) runs on, and where its figures go.

The engines: llama.cpp on the profile's model with a small KV cache, or transformers (bf16,
its runner as the environment and device choose: the CUDA-graph slot runner on a GPU) on the
profile's model or, for a machine without the weights, on the profile's architecture with
random weights (``benchmarks.dummy_models``, as ``benchmarks.gpu`` builds it). The figures go
to a JSON file after each part, so that a run cut short keeps what it measured.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

#: The KV cache of the llama.cpp replay's engine: small enough that long prompts together
#: fill it.
REPLAY_CONTEXT = 2048
#: The runners' counters worth reporting, where a runner keeps them.
RUNNER_COUNTS = (
    "preemptions",
    "largest_decode_batch",
    "largest_prefill",
    "prefill_passes",
    "decode_steps",
)


class ReplayEngines:
    """Loads a fresh chat engine per setting; owns the dummy model's folder (built once).

    Args:
        kind: ``llama.cpp`` or ``transformers``.
        profile: whose chat model (or, with ``dummy``, whose architecture) runs.
        dummy: random weights on the profile's architecture (transformers only).
        tiny: the dummy model shrunk to two small layers (a dry run on a CPU).
    """

    def __init__(self, kind: str, profile: str, dummy: bool, tiny: bool) -> None:
        if dummy and kind != "transformers":
            raise ValueError("random weights (--dummy, --tiny) run on the transformers engine")
        self.kind, self.profile, self.dummy, self.tiny = kind, profile, dummy, tiny
        self.device = "cpu"
        self.label = ""
        self._folder: tempfile.TemporaryDirectory | None = None
        self._chat: Path | str = ""

    def __enter__(self) -> ReplayEngines:
        from backend.backends.local.config import PROFILE_CHAT_MODELS

        model = PROFILE_CHAT_MODELS[self.profile]
        if self.kind == "llama.cpp":
            self.label = f"{model} (profile {self.profile}), llama.cpp, CPU"
            return self
        from benchmarks.gpu import bench_device, device_label

        self.device = bench_device()
        if self.dummy:
            from benchmarks.dummy_models import dummy_models

            self._folder = tempfile.TemporaryDirectory(prefix="core-determinism-")
            self._chat, _, sizes = dummy_models(
                Path(self._folder.name), self.profile, self.device, None, self.tiny, False
            )
            self.label = f"profile {self.profile}'s architecture, " + device_label(
                sizes, self.device
            )
        else:
            from backend.engines.weights.embedded_chat import resolve_chat_model

            self._chat = resolve_chat_model(model)
            self.label = f"{model} (profile {self.profile}), bf16, {self.device}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._folder is not None:
            self._folder.cleanup()

    def load(self, deterministic: bool):
        """A fresh chat engine, each request alone when ``deterministic`` (one slot)."""
        if self.kind == "llama.cpp":
            from backend.backends.local.config import PROFILE_CHAT_MODELS
            from backend.engines.loader import load_chat_engine

            return load_chat_engine(
                PROFILE_CHAT_MODELS[self.profile],
                "llama.cpp",
                max_context=REPLAY_CONTEXT,
                deterministic=deterministic,
            )
        from benchmarks.gpu import transformers_engine

        return transformers_engine(self._chat, self.device, deterministic=deterministic)


def runner_counts(engine) -> dict[str, int]:
    """The engine's runner's counters (``RUNNER_COUNTS``) that it keeps."""
    runner = engine._runner
    return {name: getattr(runner, name) for name in RUNNER_COUNTS if hasattr(runner, name)}


def runner_name(engine) -> str:
    """The runner's class, and whether it replays CUDA graphs."""
    runner = engine._runner
    graphs = " with CUDA graphs" if getattr(runner, "_graphs", False) else ""
    slots = getattr(runner, "_slots", None)
    count = slots if isinstance(slots, int) else len(slots or [])
    return f"{type(runner).__name__}{graphs}, {count} slots"


def default_out() -> Path | None:
    """``$OUT/determinism.json`` where ``OUT`` is set (the GPU machine's result folder)."""
    out = os.environ.get("OUT")
    return Path(out) / "determinism.json" if out else None


class Results:
    """The figures per setting, written to ``path`` (when given) after each one recorded."""

    def __init__(self, path: Path | None, about: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {"about": about, "settings": {}}
        self._began: dict[str, float] = {}
        self._write()

    def record(self, setting: str, part: str, value: Any) -> None:
        """Keep ``value`` as ``setting``'s ``part``, with the seconds since its first part."""
        figures = self.data["settings"].setdefault(setting, {"elapsed_s": {}})
        began = self._began.setdefault(setting, time.perf_counter())
        figures[part] = value
        figures["elapsed_s"][part] = round(time.perf_counter() - began, 1)
        self._write()

    def _write(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.data, indent=2) + "\n")

    def table(self, rows: list[tuple[str, Any]]) -> str:
        """One line per ``(label, read)`` row, one column per setting; ``read`` takes a
        setting's figures and returns the cell's text (a missing figure: ``-``)."""
        settings = self.data["settings"]
        cells = [["", *settings]]
        for label, read in rows:
            line = [label]
            for figures in settings.values():
                try:
                    line.append(read(figures))
                except (KeyError, TypeError, ZeroDivisionError):
                    line.append("-")
            cells.append(line)
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        return "\n".join(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in cells
        )
