"""Single-stream chat speed: our in-process backend vs raw llama.cpp and transformers generate.

Every engine gets the same prompt token ids (the chat template applied to a ~200-token user
message), greedy decoding, up to 128 new tokens and the same thread count. Each repetition
uses another prompt variant, so no engine answers from a cached prompt.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from backend.backends.local import InProcessBackend
from backend.engines.llamacpp_chat import cpu_safe_model_params, default_threads
from backend.engines.weights.embedded_chat import (
    EMBEDDED_CHAT_MODELS,
    assemble_gguf,
    convert_tokenizer,
)
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL
from benchmarks.measure import Figure
from benchmarks.texts import chat_prompt

NEW_TOKENS = 128


@dataclass(frozen=True)
class StreamTiming:
    """One generation: seconds to the first token, and tokens/s after it."""

    ttft: float
    decode_rate: float
    tokens: int

    @classmethod
    def from_token_times(cls, started: float, times: list[float]) -> StreamTiming:
        if len(times) < 2:
            raise RuntimeError(f"only {len(times)} tokens generated: cannot time decoding")
        return cls(times[0] - started, (len(times) - 1) / (times[-1] - times[0]), len(times))


def _messages(variant: int) -> list[dict]:
    return [{"role": "user", "content": chat_prompt(variant)}]


def time_backend_stream(
    backend, variant: int, max_tokens: int = NEW_TOKENS, **fields
) -> StreamTiming:
    """Stream through a ``Backend`` (in-process or HTTP); token count from the usage.

    ``fields`` replace or add request fields (other messages, a ``response_format``).
    """
    request = {
        "model": DEFAULT_CHAT_MODEL,
        "messages": _messages(variant),
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        **fields,
    }
    started = time.perf_counter()
    first = last = None
    tokens = 0
    for chunk in backend.stream_chat(request):
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.perf_counter()
            first = first or last
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    if first is None or tokens < 2:
        raise RuntimeError("the stream produced fewer than two tokens")
    return StreamTiming(first - started, (tokens - 1) / (last - first), tokens)


def open_llama(**settings):
    """``llama_cpp.Llama(**settings)``, with our engine's model parameters where they matter.

    ``Llama`` takes no argument for llama.cpp's weight buffer types, and a llama.cpp built with
    AMX crashes on these machines with them on (``cpu_safe_model_params``): its default
    parameters stand in for ours while it loads.
    """
    import llama_cpp
    from llama_cpp import Llama

    defaults = llama_cpp.llama_cpp.llama_model_default_params
    llama_cpp.llama_cpp.llama_model_default_params = lambda: cpu_safe_model_params(defaults())
    try:
        return Llama(**settings)
    finally:
        llama_cpp.llama_cpp.llama_model_default_params = defaults


class RawLlamaCpp:
    """``llama_cpp.Llama`` used directly, as a user of llama-cpp-python would."""

    def __init__(self, gguf_path, threads: int) -> None:
        self.llama = open_llama(
            model_path=str(gguf_path),
            n_ctx=4096,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

    def run(
        self, prompt_ids: list[int], eos: set[int], max_new_tokens: int = NEW_TOKENS
    ) -> StreamTiming:
        self.llama.reset()
        times = []
        started = time.perf_counter()
        for token in self.llama.generate(prompt_ids, temp=0.0, top_k=0, repeat_penalty=1.0):
            times.append(time.perf_counter())
            if token in eos or len(times) >= max_new_tokens:
                break
        return StreamTiming.from_token_times(started, times)


class HFGenerate:
    """transformers ``model.generate`` in bf16 on the dequantized weights, timed per token."""

    def __init__(self, model_name: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from backend.engines.weights.embedded_chat import resolve_chat_model

        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(
            resolve_chat_model(model_name), dtype=torch.bfloat16
        ).eval()

    def run(
        self, prompt_ids: list[int], eos: set[int], max_new_tokens: int = NEW_TOKENS
    ) -> StreamTiming:
        from transformers.generation.streamers import BaseStreamer

        times: list[float] = []

        class TokenClock(BaseStreamer):
            prompt_seen = False

            def put(self, value):
                if not self.prompt_seen:  # generate() first passes the prompt
                    self.prompt_seen = True
                    return
                times.append(time.perf_counter())

            def end(self):
                pass

        input_ids = self.torch.tensor([prompt_ids])
        started = time.perf_counter()
        with self.torch.inference_mode():
            self.model.generate(
                input_ids,
                attention_mask=self.torch.ones_like(input_ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=sorted(eos),
                pad_token_id=sorted(eos)[0],
                streamer=TokenClock(),
            )
        return StreamTiming.from_token_times(started, times)


def single_stream_figures(backend: InProcessBackend, model_name: str, repeats: int) -> list[Figure]:
    """Decode rate vs llama.cpp and vs transformers bf16, and time to first token vs the latter."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig

    threads = default_threads()
    torch.set_num_threads(threads)
    model = EMBEDDED_CHAT_MODELS[model_name]
    tokenizer_folder = convert_tokenizer(model)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    eos = set(GenerationConfig.from_pretrained(tokenizer_folder).eos_token_id)
    raw = RawLlamaCpp(assemble_gguf(model), threads)
    hf = HFGenerate(model_name)

    def prompt_ids(variant: int) -> list[int]:
        return list(
            tokenizer.apply_chat_template(
                _messages(variant), add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )

    runners: dict[str, Callable[[int], StreamTiming]] = {
        "ours": lambda v: time_backend_stream(backend, v),
        "llama.cpp": lambda v: raw.run(prompt_ids(v), eos),
        "transformers": lambda v: hf.run(prompt_ids(v), eos),
    }
    # Warm-up (allocations, caches), short: the bf16 baseline is slow.
    time_backend_stream(backend, -1, max_tokens=8)
    raw.run(prompt_ids(-1), eos, max_new_tokens=8)
    hf.run(prompt_ids(-1), eos, max_new_tokens=8)
    timings: dict[str, list[StreamTiming]] = {name: [] for name in runners}
    names = list(runners)
    for repeat in range(repeats):
        # Rotate the order, so no engine always runs first (or last) in a repetition.
        for name in names[repeat % 3 :] + names[: repeat % 3]:
            timings[name].append(runners[name](repeat))

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(t, field) for t in timings[name])

    prompt_tokens = len(prompt_ids(0))
    note = f"{model_name}, prompt {prompt_tokens} tokens, <= {NEW_TOKENS} new, {threads} threads"
    return [
        Figure(
            "chat_decode_vs_llamacpp",
            "tokens/s",
            median("llama.cpp", "decode_rate"),
            median("ours", "decode_rate"),
            goal=">= 0.9",
            note=note + "; raw llama-cpp-python on the same GGUF",
        ),
        Figure(
            "chat_decode_vs_hf_generate",
            "tokens/s",
            median("transformers", "decode_rate"),
            median("ours", "decode_rate"),
            goal="report",
            note=note + "; transformers generate, bf16, dequantized weights",
        ),
        Figure(
            "chat_ttft_vs_hf_generate",
            "s",
            median("transformers", "ttft"),
            median("ours", "ttft"),
            goal="<= 1.2",
            note=note,
        ),
    ]
