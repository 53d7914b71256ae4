"""The transformers chat engine's continuous batching: concurrent streams against the same
requests one at a time and against transformers ``generate``, and the judge's checks.

One model is loaded, as the service loads it (``EngineConfig``: the device, the device's
default dtype), and every side runs on it: the batching runner (``TransformersRunner`` with a
slot per stream), a runner with one slot (the engine before batching, ``parallel=1``) and
``model.generate`` on a left-padded batch. Every stream decodes exactly ``NEW_TOKENS`` greedy
tokens: the runners are driven as the engine drives them (``choose_token``, greedy) with no
end-of-sequence ids, and ``generate`` gets ``min_new_tokens`` = ``max_new_tokens``, so each side
computes the same number of tokens whatever the model would have said. The rate is every
token over the wall time from submitting all the requests to the last token: prompt
evaluation included (each runner evaluates prompts one at a time, ``generate`` all at once).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from backend.backends.local import EngineConfig
from backend.chat.yes_no import YesNoReader
from backend.engines.base import SamplingParams
from backend.engines.sampling import choose_token
from backend.engines.transformers_chat import TransformersChatEngine
from backend.engines.transformers_runner import TransformersRunner
from backend.engines.weights.embedded_chat import resolve_chat_model
from backend.groundedness.calibration import calibration_for
from backend.groundedness.judge import GroundednessJudge
from benchmarks.measure import Figure, interleaved, rotated, timed
from benchmarks.texts import chat_prompt

#: Greedy tokens per stream; ``CORE_BENCH_NEW_TOKENS`` lowers it for a quick check that the
#: group runs (the figures need the default).
NEW_TOKENS = int(os.environ.get("CORE_BENCH_NEW_TOKENS", "64"))
#: Words of each stream's user message (``texts.chat_prompt``): about 90 prompt tokens with
#: the chat template, so that prompt evaluation does not swamp 64 decoded tokens.
PROMPT_WORDS = 40
#: Short groundedness checks run at once, and one after the other, for the judge's figures.
JUDGE_CHECKS = 4


def stream_counts(cuda: bool) -> list[int]:
    """The concurrent streams measured: 64 only on a GPU (on a CPU they would take minutes)."""
    return [1, 4, 16, 64] if cuda else [1, 4, 16]


def aggregate_rate(produced: Sequence[int], expected: int, seconds: float) -> float:
    """Tokens/s of streams that each had to decode ``expected`` tokens in ``seconds`` in all.

    Raises:
        RuntimeError: a stream decoded another count, so the sides would not compare.
    """
    wrong = [count for count in produced if count != expected]
    if wrong:
        raise RuntimeError(f"a stream decoded {wrong[0]} tokens instead of {expected}")
    return sum(produced) / seconds


class BatchingBench:
    """The model, its runners and the prompts; ``loaded`` builds and closes it."""

    def __init__(self, profile: str) -> None:
        config = EngineConfig.from_env(profile=profile)
        self.profile = profile
        self.model_name = config.chat_model
        # The engine serves the judge's figure; the runners below decode the streams.
        self.engine = TransformersChatEngine(
            resolve_chat_model(config.chat_model), device=config.device, dtype=config.chat_dtype
        )
        model, device = self.engine.model, self.engine.device
        self.cuda = device.startswith("cuda")
        self.counts = stream_counts(self.cuda)
        self.batching = TransformersRunner(model, device, slots=max(self.counts))
        self.one_at_a_time = TransformersRunner(model, device, slots=1)
        #: Our aggregate tokens/s by stream count, for the acceptance figures.
        self.ours: dict[int, float] = {}
        self._greedy = SamplingParams(max_new_tokens=NEW_TOKENS)

    def close(self) -> None:
        self.batching.close()
        self.one_at_a_time.close()
        self.engine.close()

    @property
    def setting(self) -> str:
        dtype = str(self.engine.model.dtype).removeprefix("torch.")
        threads = "" if self.cuda else f", torch threads: {torch.get_num_threads()}"
        return f"{self.model_name}, {dtype} on {self.engine.device}{threads}"

    # ------------------------------------------------------------------ the sides

    def prompts(self, count: int) -> list[list[int]]:
        """``count`` chat prompts (token ids), each another variant: their lengths differ, so
        the batches are left-padded."""
        return [
            list(
                self.engine.tokenizer.apply_chat_template(
                    [{"role": "user", "content": chat_prompt(variant, PROMPT_WORDS)}],
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=False,
                )
            )
            for variant in range(count)
        ]

    def runner_rate(
        self, runner: TransformersRunner, prompts: list[list[int]], new_tokens: int = NEW_TOKENS
    ) -> float:
        """Aggregate tokens/s of every prompt submitted at once, each read on its own thread."""

        def stream(prompt: list[int]) -> int:
            tokens = runner.generate(
                prompt,
                new_tokens,
                lambda logits: choose_token(logits, self._greedy),
                lambda: False,
                frozenset(),  # no end ids: every stream decodes new_tokens
            )
            return sum(1 for _ in tokens)

        with ThreadPoolExecutor(len(prompts)) as pool:
            started = time.perf_counter()
            produced = list(pool.map(stream, prompts))
            seconds = time.perf_counter() - started
        return aggregate_rate(produced, new_tokens, seconds)

    def generate_rate(self, prompts: list[list[int]], new_tokens: int = NEW_TOKENS) -> float:
        """Aggregate tokens/s of ``model.generate`` on the prompts as one left-padded batch."""
        from transformers import GenerationConfig

        tokenizer, model = self.engine.tokenizer, self.engine.model
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        width = max(len(prompt) for prompt in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention_mask[row, width - len(prompt) :] = 1
        # Greedy and nothing else, whatever the model's generation config holds (Qwen's
        # published one samples with a repetition penalty, which the runners would not apply).
        settings = GenerationConfig(
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            repetition_penalty=1.0,
            eos_token_id=sorted(self.engine.eos_token_ids),
            pad_token_id=pad,
        )
        started = time.perf_counter()
        with torch.inference_mode():
            output = model.generate(
                input_ids=input_ids.to(self.engine.device),
                attention_mask=attention_mask.to(self.engine.device),
                generation_config=settings,
            ).cpu()
        seconds = time.perf_counter() - started
        return aggregate_rate([output.shape[1] - width] * len(prompts), new_tokens, seconds)

    def warm_up(self) -> None:
        """Allocations and kernels on every side, a few tokens each."""
        prompts = self.prompts(2)
        for runner in (self.batching, self.one_at_a_time):
            self.runner_rate(runner, prompts, new_tokens=2)
        self.generate_rate(prompts, new_tokens=2)

    # ------------------------------------------------------------------ the figures

    def stream_figures(self, streams: int, repeats: int) -> list[Figure]:
        """``streams`` concurrent streams: the batching runner vs one at a time and vs
        ``generate``."""
        prompts = self.prompts(streams)
        rates = rotated(
            {
                "one at a time": lambda: self.runner_rate(self.one_at_a_time, prompts),
                "generate": lambda: self.generate_rate(prompts),
                "ours": lambda: self.runner_rate(self.batching, prompts),
            },
            repeats,
        )
        self.ours[streams] = rates["ours"]
        lengths = sorted(len(prompt) for prompt in prompts)
        note = (
            f"{self.setting}; concurrent greedy streams: {streams}, each exactly {NEW_TOKENS} "
            f"tokens, prompts of {lengths[0]}-{lengths[-1]} tokens; all tokens over the wall "
            "time, prompt evaluation included"
        )
        return [
            Figure(
                f"transformers_streams_{streams}_vs_one_at_a_time",
                "tokens/s",
                rates["one at a time"],
                rates["ours"],
                goal="report",
                note=note + "; baseline: the same requests on a one-slot runner (parallel=1)",
            ),
            Figure(
                f"transformers_streams_{streams}_vs_hf_generate",
                "tokens/s",
                rates["generate"],
                rates["ours"],
                goal="report",
                note=note + "; baseline: model.generate on them as one left-padded batch",
            ),
        ]

    def goal_figures(self) -> list[Figure]:
        """The acceptance ratios: 4 streams at least twice one stream's tokens/s, and on a GPU
        64 streams at least twenty times (from the runs of ``stream_figures``)."""
        goals = {4: ">= 2.0", 64: ">= 20"}
        return [
            Figure(
                f"transformers_streams_{streams}_vs_1",
                "tokens/s",
                self.ours[1],
                self.ours[streams],
                goal=goal,
                note=f"{self.setting}; the batching runner's figures above, {NEW_TOKENS} tokens",
            )
            for streams, goal in goals.items()
            if streams in self.ours and 1 in self.ours
        ]

    def judge_figures(self, repeats: int) -> list[Figure]:
        """Groundedness checks/s with the engine's batched scoring (every prompt of a check
        at once, concurrent checks together) against the engine before it (each prompt
        scored alone, checks one after the other): ``JUDGE_CHECKS`` short pairs, and one
        long RAG-sized check (``LONG_CHECK``, about 2,000 context tokens, several claims).
        The judge asks the questions its calibration for this reader asks."""
        questions = calibration_for(self.profile, "transformers").questions
        batched = GroundednessJudge(self.engine, questions=questions)
        alone = GroundednessJudge(PromptAtATimeReader(self.engine), questions=questions)
        short = [
            (
                f"The river museum in town {i} opened in {1890 + i} and has {i + 3} floors.",
                f"The river museum opened in {1890 + i}.",
            )
            for i in range(JUDGE_CHECKS)
        ]
        long = [long_check()]
        differences: list[float] = []

        def one_after_the_other(pairs: list[tuple[str, str]]) -> float:
            return timed(lambda: [alone.assess(*pair) for pair in pairs])

        def at_once(pairs: list[tuple[str, str]]) -> float:
            with ThreadPoolExecutor(len(pairs)) as pool:
                return timed(lambda: list(pool.map(lambda pair: batched.assess(*pair), pairs)))

        for pair in (short[0], long[0]):  # warm-up, and how far batching moves the support
            differences.append(abs(batched.assess(*pair).support - alone.assess(*pair).support))
        figures = []
        for name, pairs in (("short", short), ("long", long)):
            base_s, ours_s = interleaved(
                lambda pairs=pairs: one_after_the_other(pairs),
                lambda pairs=pairs: at_once(pairs),
                repeats,
            )
            figures.append(
                Figure(
                    f"transformers_judge_{name}_checks_per_s",
                    "checks/s",
                    len(pairs) / base_s,
                    len(pairs) / ours_s,
                    goal="report",
                    note=(
                        f"{self.setting}; {len(pairs)} check(s), "
                        + ("one-sentence pairs" if name == "short" else LONG_CHECK)
                        + f"; questions: {', '.join(questions)}; baseline: each prompt scored "
                        "alone, checks one after the other; support moved by batching: "
                        f"{max(differences):.4f} at most"
                    ),
                )
            )
        return figures


class PromptAtATimeReader(YesNoReader):
    """The judge's reader before batched scoring: every prompt evaluated alone, in order."""

    def read_many(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, int]]:
        prompts = [self.prompt_ids(conversation) for conversation in conversations]
        return [(self.probability(ids), len(ids)) for ids in prompts]


#: The long check: a row of the calibration set with a multi-paragraph context.
LONG_CHECK = "v2-001 of benchmarks/eval/groundedness_v2.jsonl (an annual report, 3 claims)"


def long_check() -> tuple[str, str]:
    """The context and response of ``LONG_CHECK``."""
    path = Path(__file__).parent / "eval" / "groundedness_v2.jsonl"
    with path.open(encoding="utf-8") as rows:
        row = next(json.loads(line) for line in rows if '"v2-001"' in line)
    return row["context"], row["response"]


@contextlib.contextmanager
def loaded(profile: str) -> Iterator[BatchingBench]:
    bench = BatchingBench(profile)
    try:
        bench.warm_up()
        yield bench
    finally:
        bench.close()
