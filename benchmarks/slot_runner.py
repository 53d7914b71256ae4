"""The transformers engine's slot runner (``CORE_CUDA_GRAPHS``, issue 34) against its default
runner, and the service's layers over it: ``python -m benchmarks.slot_runner``.

One model is loaded as the service loads it (``EngineConfig``) and both runners decode on it:

- tokens/s of 1 and 8 concurrent greedy streams, each exactly ``NEW_TOKENS`` tokens (no end
  ids), slot runner against the default runner (``transformers_batching``'s prompts);
- the same 8 requests through ``backend.connect()``'s chat (an ``InProcessBackend`` on the
  slot runner's engine) against the bare engine: the service's layers (rendering, output
  processing, detokenising) over what the engine makes, tokens counted from both sides;
- 64 short chat prompts submitted at once, each decoding a few tokens: how far apart their
  first tokens come, in seconds and in decode steps of the runner (its median step at 64
  rows), slot runner (all prefilled in one pass) against the default runner (one prompt
  admitted per step). On a CPU the slot runner runs eagerly: no CUDA graphs here.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from backend.backends.local import EngineConfig, InProcessBackend
from backend.engines.base import SamplingParams
from backend.engines.transformers_chat import TransformersChatEngine
from backend.engines.transformers_runner import TransformersRunner
from backend.engines.transformers_slots import SlotRunner
from backend.engines.weights.embedded_chat import resolve_chat_model
from benchmarks.eval.run_eval import DEFAULT_CHAT_MODEL
from benchmarks.measure import Figure, print_table, rotated
from benchmarks.transformers_batching import BatchingBench

NEW_TOKENS = 64
TOGETHER = 64
FIRST_TOKEN_BUDGET = 4
#: Decode steps at full batch whose median is a runner's step time.
STEADY_STEPS = 12


class SlotBench(BatchingBench):
    """``BatchingBench``'s model and prompts, with a slot runner and a default runner of
    ``TOGETHER`` slots each."""

    def __init__(self, profile: str) -> None:
        super().__init__(profile)
        model, device = self.engine.model, self.engine.device
        self.slots = SlotRunner(model, device, TOGETHER, 4096, graphs=True)
        self.default = TransformersRunner(model, device, slots=TOGETHER)
        self.config = EngineConfig.from_env(profile=profile)
        self._greedy = SamplingParams(max_new_tokens=NEW_TOKENS)

    def close(self) -> None:
        self.slots.close()
        self.default.close()
        super().close()

    def chat_ids(self, question: str) -> list[int]:
        """A one-message chat prompt, as the chat template renders it."""
        return list(
            self.engine.tokenizer.apply_chat_template(
                [{"role": "user", "content": question}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )

    def stream_figures(self, streams: int, repeats: int) -> list[Figure]:
        prompts = self.prompts(streams)
        rates = rotated(
            {
                "default": lambda: self.runner_rate(self.default, prompts, NEW_TOKENS),
                "slots": lambda: self.runner_rate(self.slots, prompts, NEW_TOKENS),
            },
            repeats,
        )
        return [
            Figure(
                f"slot_runner_streams_{streams}_vs_default_runner",
                "tokens/s",
                rates["default"],
                rates["slots"],
                goal="report",
                note=f"{self.setting}; {streams} greedy streams of exactly {NEW_TOKENS} tokens",
            )
        ]

    def service_figure(self, repeats: int) -> Figure:
        """8 greedy requests through ``backend.connect()``'s chat against the bare engine."""
        engine = TransformersChatEngine(
            resolve_chat_model(self.config.chat_model),
            device=self.engine.device,
            dtype=str(self.engine.model.dtype).removeprefix("torch."),
            parallel=8,
            cuda_graphs=True,
        )
        service = InProcessBackend(profile=self.profile, chat_engine_instance=engine)
        questions = [f"Write a short story about a {animal}." for animal in ANIMALS]
        params = SamplingParams(max_new_tokens=NEW_TOKENS)
        prompts = [self.chat_ids(question) for question in questions]

        def bare() -> float:
            with ThreadPoolExecutor(8) as pool:
                started = time.perf_counter()
                counts = list(
                    pool.map(lambda p: sum(1 for _ in engine.generate(p, params)), prompts)
                )
                return sum(counts) / (time.perf_counter() - started)

        def through_service() -> float:
            def ask(question: str) -> int:
                reply = service.chat(
                    {
                        "model": DEFAULT_CHAT_MODEL,
                        "messages": [{"role": "user", "content": question}],
                        "temperature": 0,
                        "max_tokens": NEW_TOKENS,
                    }
                )
                return reply.usage.completion_tokens

            with ThreadPoolExecutor(8) as pool:
                started = time.perf_counter()
                counts = list(pool.map(ask, questions))
                return sum(counts) / (time.perf_counter() - started)

        try:
            bare()
            rates = rotated({"engine": bare, "service": through_service}, repeats)
        finally:
            service.close()
        return Figure(
            "slot_runner_service_8_streams_vs_engine",
            "tokens/s",
            rates["engine"],
            rates["service"],
            goal=">= 0.9",
            note=f"{self.setting}; 8 greedy requests, up to {NEW_TOKENS} tokens each",
        )

    def first_token_figures(self) -> list[Figure]:
        """64 short prompts submitted together: the spread of their first tokens."""
        prompts = [self.chat_ids(f"Say the number {n}.") for n in range(TOGETHER)]
        figures = []
        spreads = {}
        for name, runner in (("default", self.default), ("slots", self.slots)):
            spread = first_token_spread(runner, prompts, self._greedy)
            step = steady_step(runner, prompts, self._greedy)
            spreads[name] = (spread, step)
        for unit, index in (("s", None), ("decode steps", 1)):
            base = spreads["default"][0] / (spreads["default"][1] if index else 1)
            ours = spreads["slots"][0] / (spreads["slots"][1] if index else 1)
            figures.append(
                Figure(
                    f"slot_runner_first_tokens_{TOGETHER}_spread_{unit.split()[0]}",
                    unit,
                    base,
                    ours,
                    goal="<= 3" if index else "report",
                    note=(
                        f"{self.setting}; {TOGETHER} chat prompts submitted at once: last "
                        "first token less first; a decode step: the runner's median at "
                        f"{TOGETHER} rows (default {spreads['default'][1]:.3f} s, slots "
                        f"{spreads['slots'][1]:.3f} s)"
                    ),
                )
            )
        return figures


ANIMALS = ["cat", "dog", "fox", "owl", "bee", "whale", "horse", "crow"]


def first_token_spread(runner, prompts: list[list[int]], greedy: SamplingParams) -> float:
    """Seconds between the first and the last first token of ``prompts`` submitted together."""
    from backend.engines.sampling import choose_token

    start = threading.Barrier(len(prompts))
    firsts: list[float] = []

    def stream(prompt: list[int]) -> None:
        start.wait()
        tokens = runner.generate(
            prompt,
            FIRST_TOKEN_BUDGET,
            lambda row: choose_token(row, greedy),
            lambda: False,
            frozenset(),
        )
        next(tokens)
        firsts.append(time.perf_counter())
        for _ in tokens:
            pass

    with ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(stream, prompts))
    return max(firsts) - min(firsts)


def steady_step(runner, prompts: list[list[int]], greedy: SamplingParams) -> float:
    """The runner's median seconds per decode step with every prompt decoding: the gaps
    between the last ``STEADY_STEPS`` tokens of the first stream, which decodes long enough
    for every other prompt to have joined."""
    from backend.engines.sampling import choose_token

    stamps: list[float] = []

    def stream(index: int, prompt: list[int]) -> None:
        budget = len(prompts) + STEADY_STEPS + 1 if index == 0 else len(prompts) + 2 * STEADY_STEPS
        for _ in runner.generate(
            prompt, budget, lambda row: choose_token(row, greedy), lambda: False, frozenset()
        ):
            if index == 0:
                stamps.append(time.perf_counter())

    with ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(stream, range(len(prompts)), prompts))
    tail = stamps[-STEADY_STEPS - 1 :]
    return statistics.median(b - a for a, b in zip(tail, tail[1:], strict=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["default", "small"], default="small")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    bench = SlotBench(args.profile)
    figures: list[Figure] = []
    try:
        bench.warm_up()
        for streams in (1, 8):
            figures += bench.stream_figures(streams, args.repeats)
        figures.append(bench.service_figure(args.repeats))
        figures += bench.first_token_figures()
    finally:
        bench.close()
    print_table(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
