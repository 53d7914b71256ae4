"""Chat on a GPU, side by side with transformers' own, without the weights: ``make bench-gpu``
(``python -m benchmarks.gpu``; issue 34).

The profile's chat architecture is built from its config and tokenizer with random weights
(``benchmarks.dummy_models``), and one run measures, every stream decoding exactly
``NEW_TOKENS`` greedy tokens (no end ids on the engine's side; ``min_new_tokens`` for
``generate``; the service's and the server's counts as they report them):

- transformers ``generate`` on the prompts as one left-padded batch, eager, and with a static
  cache (which transformers compiles with CUDA graphs on a GPU): the baselines;
- our engine alone: the transformers engine on the slot runner (``CORE_CUDA_GRAPHS``);
- the service over that engine (``backend.connect()``'s chat, non-streamed requests);
- the HTTP server (``core-textmodels serve`` in a child process) with ``STREAMS`` streamed
  clients: tokens/s and the time to each stream's first content (p50, p95);
- the floor of one stream: the weights one token reads, at the device's measured copy rate.

``--tiny`` shrinks the model and the counts for a dry run on a CPU (the figures then mean
nothing). Results also go to ``--out`` (JSON), the figures labelled with the weights' origin.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from benchmarks.dummy_models import dummy_models
from benchmarks.measure import Figure, print_table, timed
from benchmarks.texts import chat_prompt

NEW_TOKENS = 64
#: Concurrent streams of the figures: the issue's goals are at 1 and 64.
STREAMS = 64
#: The streams at which the service is compared with the engine alone (issue 34: >= 0.9x).
COMPARED_STREAMS = 8
PROMPT_WORDS = 40
CHAT_MODEL = "core-1-mini-chat"
#: The two ``generate`` baselines.
GENERATE = {
    "eager": "eager",
    "compiled": "static cache (transformers compiles it, with CUDA graphs, on a GPU only)",
}


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def copy_rate(device: str, nbytes: int) -> float:
    """Bytes read and written per second by a device-to-device copy of ``nbytes``."""
    source = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    synchronize()
    seconds = min(timed(lambda: (target.copy_(source), synchronize())) for _ in range(5))
    return 2 * nbytes / seconds


def bench_device() -> str:
    """``CORE_DEVICE`` when set, else CUDA where there is one, else the CPU."""
    return os.environ.get("CORE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def device_label(sizes: dict, device: str) -> str:
    """What every figure on the dummy chat model says of its weights and device."""
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    return f"random weights ({sizes['params'] / 1e6:.0f} M parameters, bf16), {name}"


def transformers_engine(chat: Path | str, device: str, **options):
    """The transformers engine on ``chat`` in bf16; ``options`` go to
    ``TransformersChatEngine`` (``parallel``, ``deterministic``, ``cuda_graphs``: unset, the
    environment's or the default)."""
    from backend.engines.transformers_chat import TransformersChatEngine

    return TransformersChatEngine(str(chat), device=device, dtype="bfloat16", **options)


class GPUBench:
    """The dummy chat model on the engine, the service over it, and ``generate`` on its weights."""

    def __init__(self, chat: Path, device: str, streams: int, new_tokens: int) -> None:
        from backend.backends.local import InProcessBackend

        self.device, self.new_tokens = device, new_tokens
        self.engine = transformers_engine(chat, device, parallel=streams, cuda_graphs=True)
        self.service = InProcessBackend(chat_engine_instance=self.engine)
        self.messages = [
            [{"role": "user", "content": chat_prompt(variant, PROMPT_WORDS)}]
            for variant in range(streams)
        ]

    def close(self) -> None:
        self.service.close()
        self.engine.close()

    def prompt_ids(self, count: int) -> list[list[int]]:
        return [
            list(
                self.engine.tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            )
            for messages in self.messages[:count]
        ]

    def engine_rate(self, count: int) -> float:
        """Tokens/s of ``count`` greedy streams on the engine, each on its own thread."""
        from backend.engines.base import SamplingParams

        params = SamplingParams(max_new_tokens=self.new_tokens)
        prompts = self.prompt_ids(count)
        with ThreadPoolExecutor(count) as pool:
            started = time.perf_counter()
            tokens = sum(
                pool.map(lambda p: sum(1 for _ in self.engine.generate(p, params)), prompts)
            )
            return tokens / (time.perf_counter() - started)

    def service_rate(self, count: int) -> float:
        """Tokens/s of ``count`` greedy chat requests through the service at once."""

        def ask(messages: list[dict]) -> int:
            request = {
                "model": CHAT_MODEL,
                "messages": messages,
                "temperature": 0,
                "max_tokens": self.new_tokens,
            }
            return self.service.chat(request).usage.completion_tokens

        with ThreadPoolExecutor(count) as pool:
            started = time.perf_counter()
            tokens = sum(pool.map(ask, self.messages[:count]))
            return tokens / (time.perf_counter() - started)

    def generate_rate(self, count: int, static: bool) -> float:
        """Tokens/s of ``model.generate`` on ``count`` prompts as one left-padded batch, after
        a first call (with a static cache, transformers compiles on it)."""
        from transformers import GenerationConfig

        tokenizer, model = self.engine.tokenizer, self.engine.model
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        batch = tokenizer.pad(
            {"input_ids": self.prompt_ids(count)}, padding_side="left", return_tensors="pt"
        ).to(self.device)
        settings = GenerationConfig(
            max_new_tokens=self.new_tokens,
            min_new_tokens=self.new_tokens,
            do_sample=False,
            repetition_penalty=1.0,
            eos_token_id=sorted(self.engine.eos_token_ids),
            pad_token_id=pad,
            cache_implementation="static" if static else None,
        )

        def run() -> None:
            with torch.inference_mode():
                model.generate(**batch, generation_config=settings)
            synchronize()

        run()
        return count * self.new_tokens / min(timed(run) for _ in range(2))


def server_streams(
    chat: Path, embeddings: Path | None, device: str, streams: int, new_tokens: int
) -> dict:
    """``streams`` streamed requests at once to a server on the dummy model: tokens/s, and
    each stream's time to its first content (the best of two rounds, after a warm-up)."""
    from backend.testing.servers import ServerProcess

    env = {
        "CORE_CHAT_MODEL": str(chat),
        "CORE_CHAT_ENGINE": "transformers",
        "CORE_CUDA_GRAPHS": "1",
        "CORE_CHAT_PARALLEL": str(streams),
        "CORE_DEVICE": device,
    }
    if embeddings is not None:
        env["CORE_EMBEDDING_MODEL"] = str(embeddings)
    settings = {"max_concurrent": streams, "max_concurrent_streams": streams, "max_queued": streams}
    with ServerProcess(None, settings=settings, env=env) as server:
        clients = [server.client(timeout=600) for _ in range(streams)]
        try:
            streamed(clients[:2], 2)
            return min((streamed(clients, new_tokens) for _ in range(2)), key=lambda r: r["p95"])
        finally:
            for client in clients:
                client.close()


def streamed(clients: list, new_tokens: int) -> dict:
    """One streamed request per client, all at once."""

    def one(index: int) -> tuple[float, float | None, float, int]:
        request = {
            "model": CHAT_MODEL,
            "messages": [{"role": "user", "content": chat_prompt(index, PROMPT_WORDS)}],
            "temperature": 0,
            "max_tokens": new_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        began, first, tokens = time.perf_counter(), None, 0
        for chunk in clients[index].stream_chat(request):
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        return began, first, time.perf_counter(), tokens

    with ThreadPoolExecutor(len(clients)) as pool:
        done = list(pool.map(one, range(len(clients))))
    firsts = sorted(first - began for began, first, _, _ in done if first is not None)
    seconds = max(d[2] for d in done) - min(d[0] for d in done)
    return {
        "tokens_per_s": sum(d[3] for d in done) / seconds,
        "p50": statistics.median(firsts),
        "p95": firsts[min(len(firsts) - 1, round(0.95 * (len(firsts) - 1)))],
        "without_content": len(done) - len(firsts),
    }


def best_of(times: int, rate, count: int) -> float:
    """The best of ``times`` measurements (as ``generate_rate`` takes its best of two)."""
    return max(rate(count) for _ in range(times))


def measured_rates(bench: GPUBench) -> dict[str, dict[int, float]]:
    """Tokens/s of each side at 1 stream, at ``COMPARED_STREAMS`` (engine and service) and at
    the bench's full count, each printed as it is measured (a run cut short keeps them)."""
    many = len(bench.messages)
    compared = min(COMPARED_STREAMS, many)
    sides = {
        "engine": (lambda count: best_of(2, bench.engine_rate, count), (1, compared, many)),
        "service": (lambda count: best_of(2, bench.service_rate, count), (1, compared, many)),
        "eager": (lambda count: bench.generate_rate(count, static=False), (1, many)),
        "compiled": (lambda count: bench.generate_rate(count, static=True), (1, many)),
    }
    rates: dict[str, dict[int, float]] = {}
    runner = bench.engine._runner
    for name, (measure, counts) in sides.items():
        for count in sorted(set(counts)):
            passes, steps = runner.prefill_passes, runner.decode_steps
            started = time.perf_counter()
            rate = measure(count)
            rates.setdefault(name, {})[count] = rate
            took = time.perf_counter() - started
            print(
                f"{name}, {count} streams: {rate:.1f} tokens/s ({took:.2f} s; "
                f"{runner.prefill_passes - passes} prefill passes, "
                f"{runner.decode_steps - steps} decode steps)",
                flush=True,
            )
    return rates


def figures(rates: dict, server: dict, floor: float, label: str, new_tokens: int) -> list[Figure]:
    many = max(rates["service"])
    compared = min(COMPARED_STREAMS, many)
    note = f"{label}; {new_tokens} greedy tokens a stream"
    out = [
        Figure(
            f"gpu_{compared}_streams_service_vs_engine",
            "tokens/s",
            rates["engine"][compared],
            rates["service"][compared],
            ">= 0.9",
            note + "; baseline: the engine alone on the same requests",
        ),
        Figure("gpu_1_stream_service", "tokens/s", None, rates["service"][1], ">= 200", note),
        Figure(
            f"gpu_{many}_streams_service", "tokens/s", None, rates["service"][many], ">= 5000", note
        ),
        Figure(
            "gpu_1_stream_service_vs_bandwidth_floor",
            "tokens/s",
            floor,
            rates["service"][1],
            "report",
            note + "; baseline: the weights one token reads, at the measured copy rate",
        ),
    ]
    for count in (1, many):
        for baseline in ("eager", "compiled"):
            for side in ("engine", "service"):
                wanted = (count, baseline, side) == (many, "compiled", "service")
                out.append(
                    Figure(
                        f"gpu_{count}_streams_{side}_vs_{baseline}_generate",
                        "tokens/s",
                        rates[baseline][count],
                        rates[side][count],
                        ">= 0.6" if wanted else "report",
                        f"{note}; baseline: transformers generate, one padded batch, "
                        + GENERATE[baseline],
                    )
                )
    out.append(
        Figure(
            f"gpu_server_{many}_streams_ttft_p95",
            "s",
            None,
            server["p95"],
            "< 1 s",
            f"{label}; p50 {server['p50']:.3f} s, {server['tokens_per_s']:.0f} tokens/s, "
            f"{server['without_content']} streams without content",
        )
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default")
    parser.add_argument("--source", type=Path, help="a folder with config.json and tokenizer")
    parser.add_argument("--tiny", action="store_true", help="a dry run: small model, few tokens")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results-gpu.json"))
    args = parser.parse_args()
    device = bench_device()
    streams, new_tokens = (4, 8) if args.tiny else (STREAMS, NEW_TOKENS)
    with tempfile.TemporaryDirectory(prefix="core-gpu-bench-") as folder:
        chat, embeddings, sizes = dummy_models(
            Path(folder), args.profile, device, args.source, args.tiny
        )
        floor = copy_rate(device, 1 << (26 if args.tiny else 32)) / sizes["bytes_per_token"]
        label = device_label(sizes, device)
        started = time.perf_counter()
        bench = GPUBench(chat, device, streams, new_tokens)
        print(f"engine ready in {time.perf_counter() - started:.1f} s", flush=True)
        try:
            bench.engine_rate(2)  # the first allocations and kernels
            rates = measured_rates(bench)
        finally:
            bench.close()
        server = server_streams(chat, embeddings, device, streams, new_tokens)
        results = figures(rates, server, floor, label, new_tokens)
    print_table(results)
    args.out.write_text(json.dumps([f.record() for f in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
