"""OpenAI-compatible engines on loopback, for tests and benchmarks of the engine backend.

* ``llama_cpp_engine``: llama-cpp-python's server (``python -m llama_cpp.server``, a real
  engine, as vLLM or llama-server would be) on a profile's embedded GGUF, in a child process.
* ``embeddings_engine``: a small ``/v1/embeddings`` server running an embedding engine on the
  texts as sent (no prefixes, truncated to the encoder's window, normalised), as TEI or vLLM's
  pooling models do, with their tokenize endpoints where asked; in a thread of this process.

Needs the ``server`` extra and, for ``llama_cpp_engine``, llama-cpp-python's server extras.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import numpy as np
from pydantic import BaseModel

from backend.engines.base import EmbeddingEngine
from backend.testing.servers import LOOPBACK, free_port, serve_in_thread


class EmbeddingsBody(BaseModel):
    """What the stand-in reads of an embeddings request."""

    model: str
    input: str | list[str]


class VLLMTokenizeBody(BaseModel):
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True


class VLLMDetokenizeBody(BaseModel):
    model: str | None = None
    tokens: list[int]


class TEITokenizeBody(BaseModel):
    inputs: str | list[str]
    add_special_tokens: bool = True


class TEIDecodeBody(BaseModel):
    ids: list[int] | list[list[int]]
    skip_special_tokens: bool = True


#: The tokenize endpoints ``embeddings_engine_app`` can serve beside the embeddings.
TOKENIZE_APIS = ("vllm", "tei")


@dataclass(frozen=True)
class RunningEngine:
    """An engine's API (``.../v1``) and the id of the model it serves."""

    url: str
    model: str


def _wait_for_models(url: str, process: subprocess.Popen, log_path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=2).is_success:
                return
        time.sleep(0.25)
    with open(log_path, encoding="utf-8", errors="replace") as log:
        tail = log.read()[-2000:]
    raise RuntimeError(f"the engine at {url} did not start:\n{tail}")


@contextlib.contextmanager
def llama_cpp_engine(
    profile: str = "small",
    *,
    model_alias: str | None = None,
    threads: int | None = None,
    context_length: int = 8192,
    timeout: float = 180.0,
) -> Iterator[RunningEngine]:
    """llama-cpp-python's OpenAI-compatible server on the embedded GGUF of ``profile``, until
    the block ends. Requests are not interrupted by newer ones (``--interrupt_requests
    false``), as the engine backend expects of a shared engine."""
    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.llamacpp_runner import PREFILL_CHUNK
    from backend.engines.weights.embedded_chat import embedded_gguf

    name = PROFILE_CHAT_MODELS[profile]
    gguf = embedded_gguf(name)
    assert gguf is not None  # the profiles' models are the embedded ones
    alias = model_alias or name
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf[0])]
    command += ["--model_alias", alias, "--n_ctx", str(context_length)]
    command += ["--interrupt_requests", "false", "--host", LOOPBACK, "--port", str(port)]
    # Computed as in-process: prompts in the same chunks (llama.cpp's numbers depend a little
    # on the shape of the call that computed them, backend.engines.llamacpp_runner), and flash
    # attention, which llama.cpp's default context turns on where it runs and llama-cpp-python's
    # server turns off.
    command += ["--n_batch", str(PREFILL_CHUNK), "--n_ubatch", str(PREFILL_CHUNK)]
    command += ["--flash_attn", "true"]
    if threads is not None:
        command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    url = f"http://{LOOPBACK}:{port}/v1"
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_models(url, process, log.name, timeout)
        yield RunningEngine(url, alias)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def forget_cached_prompt(engine: RunningEngine) -> None:
    """Make llama-cpp-python's server evaluate its next prompt from the first token.

    It continues from the longest prefix that the next prompt shares with the previous one,
    so the shapes of the calls evaluating the rest, and the last digits of the logits, depend
    on what came before; a one-word prompt shares nothing with a chat prompt.
    """
    body = {"model": engine.model, "prompt": "zebra", "max_tokens": 1}
    httpx.post(f"{engine.url}/completions", json=body, timeout=120).raise_for_status()


def p_yes_gaps_from_clean_caches(
    engine: RunningEngine, conversations: list[list[dict[str, str]]], profile: str = "small"
) -> list[float]:
    """|P(yes) in-process - P(yes) from ``engine``| for each conversation, each read with
    nothing else cached on either side: on one in-process engine, each read alone (a lone
    request reads what a fresh engine reads: ``SlotCache.lay_out_alone``), the server's
    prompt forgotten before each.

    Both readers' figures depend a little on what their caches hold; with nothing cached they
    evaluate the same prompt the same way, so what is left is the reading itself.
    """
    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.backends.remote_engine.api import EngineAPI
    from backend.backends.remote_engine.judge_reading import (
        EngineYesNoReading,
        embedded_chat_tokenizer,
    )
    from backend.chat.yes_no import YesNoReader
    from backend.engines.loader import load_chat_engine

    api = EngineAPI(engine.url, None, 600.0, 0)
    remote = EngineYesNoReading(api, engine.model, embedded_chat_tokenizer(profile))
    gaps = []
    local_engine = load_chat_engine(PROFILE_CHAT_MODELS[profile], "llama.cpp")
    try:
        local = YesNoReader(local_engine)
        for conversation in conversations:
            p_local = local.read(conversation)[0]
            forget_cached_prompt(engine)
            gaps.append(abs(p_local - remote.read(conversation)[0]))
    finally:
        local_engine.close()
    return gaps


def embeddings_engine_app(engine: EmbeddingEngine, model_id: str, tokenize_api: str | None = None):
    """A FastAPI app serving ``engine`` as OpenAI's ``/v1/embeddings`` and ``/v1/models``, and
    with ``tokenize_api`` that engine's tokenize endpoints (``vllm``: ``/tokenize`` and
    ``/detokenize``; ``tei``: ``/tokenize``, ``/decode`` and ``/info``), on the model's own
    tokenizer (``engine.tokenizer``)."""
    from fastapi import FastAPI

    if tokenize_api not in (None, *TOKENIZE_APIS):
        raise ValueError(f"unknown tokenize_api {tokenize_api!r}; use one of {TOKENIZE_APIS}")
    app = FastAPI()
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenize_api == "vllm":

        @app.post("/tokenize")
        def vllm_tokenize(body: VLLMTokenizeBody) -> dict:
            ids = tokenizer(body.prompt, add_special_tokens=body.add_special_tokens)["input_ids"]
            return {"count": len(ids), "max_model_len": engine.max_window_tokens, "tokens": ids}

        @app.post("/detokenize")
        def vllm_detokenize(body: VLLMDetokenizeBody) -> dict:
            return {"prompt": tokenizer.decode(body.tokens)}

    elif tokenize_api == "tei":

        @app.post("/tokenize")
        def tei_tokenize(body: TEITokenizeBody) -> list:
            texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
            encoded = tokenizer(texts, add_special_tokens=body.add_special_tokens)["input_ids"]
            return [
                [{"id": i, "text": tokenizer.decode([i]), "special": False} for i in ids]
                for ids in encoded
            ]

        @app.post("/decode")
        def tei_decode(body: TEIDecodeBody) -> list:
            batch = body.ids if body.ids and isinstance(body.ids[0], list) else [body.ids]
            return [
                tokenizer.decode(ids, skip_special_tokens=body.skip_special_tokens) for ids in batch
            ]

        @app.get("/info")
        def tei_info() -> dict:
            return {"model_id": model_id, "max_input_length": engine.max_window_tokens}

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": model_id, "object": "model"}]}

    @app.post("/v1/embeddings")
    def embeddings(body: EmbeddingsBody) -> dict:
        texts = [body.input] if isinstance(body.input, str) else body.input
        window = engine.max_window_tokens - 2
        ids = [content[:window] for content in engine.tokenize(texts)]  # truncates, as TEI
        pooled = engine.embed_windows(ids)
        vectors = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        tokens = sum(len(i) + 2 for i in ids)
        return {
            "object": "list",
            "model": body.model,
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    return app


@contextlib.contextmanager
def embeddings_engine(
    engine: EmbeddingEngine | None = None,
    model_id: str = "intfloat/multilingual-e5-small",
    tokenize_api: str | None = None,
) -> Iterator[RunningEngine]:
    """``embeddings_engine_app`` on a free loopback port in a thread (default engine: the
    embedded multilingual-e5-small), until the block ends."""
    import uvicorn

    if engine is None:
        from backend.engines.loader import load_embedding_engine

        engine = load_embedding_engine("multilingual-e5-small")
    app = embeddings_engine_app(engine, model_id, tokenize_api)
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=0, log_level="warning"))
    with serve_in_thread(server) as url:
        yield RunningEngine(f"{url}/v1", model_id)


def p_yes_check(backend, profile: str = "small"):
    """The in-process backend's groundedness check as an engine behind an API reads it: P(yes)
    and its calibration, not the learned reading (an engine's logprobs carry no hidden
    states). Returns ``check(context, response) -> GroundednessResult`` and the calibration."""
    from backend.groundedness.calibration import calibration_for
    from backend.groundedness.service import GroundednessService
    from backend.interface import GroundednessResult

    reader = backend.judge_reader()
    calibration = calibration_for(profile, reader.kind, reads_hidden_states=False)
    service = GroundednessService(reader, calibration)

    def check(context: str, response: str) -> GroundednessResult:
        with reader.turn():
            support = service.judge.assess(context, response).support
        return GroundednessResult(calibration.verdict(support), support)

    return check, calibration
