"""What the service's layers cost per token, apart from any model: ``python -m
benchmarks.token_path`` (issue 34's lean token path).

On a GPU a decode step of 64 streams takes milliseconds, so whatever the service does per
token (rendering the reply, detokenising, output processing, handing tokens between threads,
building the response) is what stands between the engine's tokens/s and the user's. Here an
engine that costs nothing (``ReplayEngine``: the profile's real tokenizer, a fixed English
reply's token ids handed out as fast as they are asked for, never an end of turn) runs under
the service, and the figures are tokens/s and CPU microseconds per token:

- the engine alone, each stream read on its own thread (the floor of the measurement);
- ``backend.connect()``'s chat, non-streamed, and its streamed chat, 64 requests at once.

The engine's tokens here come on the reading thread itself; a real engine hands them over from
its runner thread, and what that hand-off costs under the GIL at 64 streams is not measured
here (it needs a step of a GPU's length).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor

from backend.engines.base import ChatEngine, SamplingParams
from benchmarks.measure import Figure, print_table
from benchmarks.texts import chat_prompt

STREAMS = 64
NEW_TOKENS = 64
CHAT_MODEL = "core-1-mini-chat"
REPLY = (
    "The river runs past the old mill, where the miller's daughter counts the sacks of flour "
    "each morning before the market opens. In winter the wheel freezes, and the town waits."
)


class ReplayEngine(ChatEngine):
    """A chat engine without a model: ``REPLY``'s tokens, over and over, instantly."""

    thread_safe = True

    def __init__(self, tokenizer, eos_token_ids: frozenset[int]) -> None:
        self.tokenizer = tokenizer
        self.context_length = 32768
        self.eos_token_ids = eos_token_ids
        self.device = "cpu"
        self._reply = tokenizer.encode(" " + REPLY, add_special_tokens=False)

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Generator[int, None, None]:
        for index in range(params.max_new_tokens):
            if should_stop():
                return
            yield self._reply[index % len(self._reply)]

    def next_token_logprobs(self, prompt_ids, candidate_ids) -> list[float]:
        raise NotImplementedError("the replay engine reads no model")


def replay_engine(profile: str) -> ReplayEngine:
    """The replay engine on the profile's chat tokenizer (built from its GGUF)."""
    from transformers import AutoTokenizer

    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS, convert_tokenizer

    folder = convert_tokenizer(EMBEDDED_CHAT_MODELS[PROFILE_CHAT_MODELS[profile]])
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    eos = {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    return ReplayEngine(tokenizer, frozenset(eos))


def request(index: int, stream: bool) -> dict:
    body = {
        "model": CHAT_MODEL,
        "messages": [{"role": "user", "content": chat_prompt(index, 40)}],
        "temperature": 0,
        "max_tokens": NEW_TOKENS,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def measured(work: Callable[[int], int], count: int) -> tuple[float, float]:
    """``work(i)`` for ``i`` in ``range(count)`` at once, each on its own thread: tokens/s,
    and the process's CPU microseconds per token."""
    with ThreadPoolExecutor(count) as pool:
        started, cpu = time.perf_counter(), time.process_time()
        tokens = sum(pool.map(work, range(count)))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return tokens / seconds, cpu / tokens * 1e6


def main() -> None:
    from backend.backends.local import InProcessBackend

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    engine = replay_engine(args.profile)
    service = InProcessBackend(profile=args.profile, chat_engine_instance=engine)
    params = SamplingParams(max_new_tokens=NEW_TOKENS)
    prompts = [engine.tokenizer.encode(chat_prompt(i, 40)) for i in range(STREAMS)]

    def bare(index: int) -> int:
        return sum(1 for _ in engine.generate(prompts[index], params))

    def chat(index: int) -> int:
        return service.chat(request(index, stream=False)).usage.completion_tokens

    def streamed(index: int) -> int:
        tokens = 0
        for chunk in service.stream_chat(request(index, stream=True)):
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        return tokens

    sides = {"engine": bare, "chat": chat, "stream": streamed}
    for work in sides.values():
        measured(work, 4)  # warm-up
    best = {
        name: max((measured(work, STREAMS) for _ in range(args.repeats)), key=lambda r: r[0])
        for name, work in sides.items()
    }
    service.close()
    note = (
        f"{args.profile} profile's tokenizer, no model; {STREAMS} requests at once of "
        f"{NEW_TOKENS} tokens; best of {args.repeats}"
    )
    figures = []
    for name in ("chat", "stream"):
        rate, micros = best[name]
        figures.append(
            Figure(
                f"token_path_{name}_vs_engine",
                "tokens/s",
                best["engine"][0],
                rate,
                "report",
                note + f"; {micros:.0f} CPU us a token ({best['engine'][1]:.1f} "
                "for the engine alone)",
            )
        )
    print_table(figures)


if __name__ == "__main__":
    main()
