"""The parts of an OpenAI-compatible engine's answers this backend reads, as pydantic models.

Engines differ in what else they send (vLLM's ``prompt_logprobs``, llama.cpp's ``timings``,
Ollama's ``system_fingerprint``...): extra fields are ignored, and only what is read here has
to be present. A finish reason of ``tool_calls`` or ``function_call`` is the engine's own way
of saying ``stop``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EngineFunction(_Lenient):
    name: str | None = None
    arguments: str | None = None


class EngineToolCall(_Lenient):
    index: int | None = None
    id: str | None = None
    function: EngineFunction | None = None


class EngineTopLogprob(_Lenient):
    token: str
    logprob: float
    bytes: list[int] | None = None


class EngineTokenLogprob(_Lenient):
    token: str
    logprob: float
    top_logprobs: list[EngineTopLogprob] = []


class EngineLogprobs(_Lenient):
    content: list[EngineTokenLogprob] | None = None


class EngineMessage(_Lenient):
    content: str | None = None
    tool_calls: list[EngineToolCall] | None = None


class EngineChoice(_Lenient):
    message: EngineMessage | None = None
    #: In stream chunks.
    delta: EngineMessage | None = None
    finish_reason: str | None = None
    logprobs: EngineLogprobs | None = None


class EngineUsage(_Lenient):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class EngineCompletion(_Lenient):
    """A chat completion, or one chunk of a streamed one."""

    choices: list[EngineChoice] = []
    usage: EngineUsage | None = None


class EngineEmbedding(_Lenient):
    index: int
    embedding: list[float]


class EngineEmbeddings(_Lenient):
    data: list[EngineEmbedding]
    usage: EngineUsage | None = None


class EngineModel(_Lenient):
    id: str


class EngineModels(_Lenient):
    data: list[EngineModel]
