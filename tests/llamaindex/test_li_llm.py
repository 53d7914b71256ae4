"""``Core`` on the offline scripted backend: every call form, request fields, tools, retries
and backend sharing. Fast; the real-model behaviour is in test_li_pipelines.py."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.tools import FunctionTool

from backend.protocol.errors import InternalServerError
from backend.protocol.schemas import ChatCompletionRequest
from llamaindex_core_ext import Core, CoreEmbedding, CoreGroundednessEvaluator

REPLY = "Hello there."
MESSAGES = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
WEATHER_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny in {city}"


WEATHER = FunctionTool.from_defaults(get_weather)


async def _run(llm: Core, mode: str):
    """Every way of calling the LLM; returns (final response, responses streamed)."""
    if mode == "chat":
        return llm.chat(MESSAGES), []
    if mode == "achat":
        return await llm.achat(MESSAGES), []
    if mode == "complete":
        return llm.complete("Hi"), []
    if mode == "acomplete":
        return await llm.acomplete("Hi"), []
    if mode == "stream_chat":
        parts = list(llm.stream_chat(MESSAGES))
    elif mode == "astream_chat":
        parts = [part async for part in await llm.astream_chat(MESSAGES)]
    elif mode == "stream_complete":
        parts = list(llm.stream_complete("Hi"))
    else:
        parts = [part async for part in await llm.astream_complete("Hi")]
    return parts[-1], parts


MODES = [
    "chat",
    "achat",
    "complete",
    "acomplete",
    "stream_chat",
    "astream_chat",
    "stream_complete",
    "astream_complete",
]


@pytest.mark.parametrize("mode", MODES)
async def test_every_call_form_answers_with_usage(scripted, mode):
    backend = scripted(REPLY)
    final, streamed = await _run(Core(backend=backend), mode)

    text = final.text if hasattr(final, "text") else final.message.content
    assert text == REPLY
    usage = final.additional_kwargs
    assert usage["completion_tokens"] == len(REPLY) + 1  # one token per character, plus EOS
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert final.raw.usage.total_tokens == usage["total_tokens"]
    if streamed:
        assert "".join(part.delta or "" for part in streamed) == REPLY
        assert backend.requests[0]["stream_options"] == {"include_usage": True}
    assert len(backend.requests) == 1


async def test_request_fields(scripted):
    backend = scripted(REPLY)
    llm = Core(
        backend=backend, temperature=0.0, max_tokens=5, top_p=0.5, additional_kwargs={"seed": 7}
    )
    assert llm.chat(MESSAGES).message.content == REPLY[:5]
    list(llm.stream_chat(MESSAGES))
    plain, streamed = backend.requests
    assert plain == {
        "model": "core-1-mini-chat",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "temperature": 0.0,
        "max_tokens": 5,
        "top_p": 0.5,
        "seed": 7,
    }
    assert streamed == {**plain, "stream": True, "stream_options": {"include_usage": True}}
    ChatCompletionRequest.model_validate(streamed)


def test_defaults():
    llm = Core()
    assert (llm.model, llm.temperature, llm.max_tokens, llm.top_p) == (
        "core-1-mini-chat",
        0.1,
        None,
        None,
    )
    assert (llm.timeout, llm.max_retries, llm.base_url, llm.api_key) == (60.0, 2, None, None)


@pytest.mark.parametrize(
    "model", ["core-1-mini-chat", "core-1-mini-chat-ja-240510", "my-fine-tune"]
)
def test_metadata_allows_function_calling_for_every_model(model):
    metadata = Core(model=model, max_tokens=64).metadata
    assert metadata.is_function_calling_model and metadata.is_chat_model
    assert (metadata.context_window, metadata.num_output, metadata.model_name) == (32768, 64, model)


def test_settings_from_the_environment_and_the_key_kept_out_of_dumps(monkeypatch):
    monkeypatch.setenv("CORE_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CORE_API_KEY", "sk-secret")
    llm = Core()
    assert llm.base_url == "http://127.0.0.1:9"
    assert llm.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in repr(llm) and "sk-secret" not in json.dumps(
        llm.to_dict(), default=str
    )
    assert "sk-secret" not in json.dumps(llm.to_payload(), default=str)


def test_one_in_process_backend_is_shared():
    # Nothing is loaded here: models load on first use.
    llm = Core()
    shared = llm.get_backend().inner
    assert CoreEmbedding().get_backend().inner is shared
    assert CoreGroundednessEvaluator().get_backend().inner is shared
    assert Core(temperature=0).get_backend().inner is shared
    assert not shared.ready


# ---------------------------------------------------------------- tools


def test_chat_with_tools(scripted):
    backend = scripted(WEATHER_CALL)
    llm = Core(backend=backend)
    history = [ChatMessage(role="user", content="Weather in Paris?")]
    response = llm.chat_with_tools([WEATHER], chat_history=history)

    assert history == [ChatMessage(role="user", content="Weather in Paris?")]  # not appended to
    request = backend.requests[0]
    assert request["tool_choice"] == "auto"
    assert request["tools"][0]["function"]["name"] == "get_weather"
    (selection,) = llm.get_tool_calls_from_response(response)
    assert (selection.tool_name, selection.tool_kwargs) == ("get_weather", {"city": "Paris"})
    assert selection.tool_id.startswith("call_")


@pytest.mark.parametrize(
    ("kwargs", "reply", "tool_choice"),
    [
        # The backend writes the call's opening itself; the scripted model continues it.
        (
            {"tool_required": True},
            'get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            "required",
        ),
        (
            {"tool_choice": "get_weather"},
            '{"city": "Paris"}}</tool_call>',
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_forcing_a_tool_call(scripted, kwargs, reply, tool_choice):
    backend = scripted(reply)
    llm = Core(backend=backend)
    response = llm.chat_with_tools([WEATHER], user_msg="Weather in Paris?", **kwargs)
    assert backend.requests[0]["tool_choice"] == tool_choice
    assert llm.get_tool_calls_from_response(response)[0].tool_kwargs == {"city": "Paris"}


@pytest.mark.parametrize(("parallel", "expected"), [(False, 1), (True, 2)])
async def test_parallel_tool_calls(scripted, parallel, expected):
    llm = Core(backend=scripted(WEATHER_CALL + WEATHER_CALL.replace("Paris", "Rome")))
    response = await llm.achat_with_tools(
        [WEATHER], user_msg="Paris and Rome?", allow_parallel_tool_calls=parallel
    )
    calls = llm.get_tool_calls_from_response(response)
    assert [c.tool_kwargs["city"] for c in calls] == ["Paris", "Rome"][:expected]
    assert len(response.message.additional_kwargs["tool_calls"]) == expected


async def test_streamed_tool_call(scripted):
    llm = Core(backend=scripted(WEATHER_CALL))
    stream = await llm.astream_chat_with_tools([WEATHER], user_msg="Weather in Paris?")
    responses = [response async for response in stream]
    final = responses[-1]
    assert [b.tool_name for b in final.message.blocks if isinstance(b, ToolCallBlock)] == [
        "get_weather"
    ]
    assert llm.get_tool_calls_from_response(final)[0].tool_kwargs == {"city": "Paris"}
    assert final.additional_kwargs["completion_tokens"] > 0


def test_predict_and_call_runs_the_tool(scripted):
    llm = Core(backend=scripted(WEATHER_CALL))
    assert (
        llm.predict_and_call([WEATHER], user_msg="Weather in Paris?").response == "Sunny in Paris"
    )


def test_no_tool_call(scripted):
    llm = Core(backend=scripted("I cannot tell."))
    response = llm.chat_with_tools([WEATHER], user_msg="Weather?")
    assert llm.get_tool_calls_from_response(response, error_on_no_tool_call=False) == []
    with pytest.raises(ValueError, match="I cannot tell"):
        llm.get_tool_calls_from_response(response)


# ---------------------------------------------------------------- retries


class _FailingServer(http.server.ThreadingHTTPServer):
    """Answers every request with a 500, counting them."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append((self.path, self.headers.get("Authorization")))
                body = json.dumps({"error": {"message": "boom", "type": "server_error"}}).encode()
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def failing_server() -> Iterator[_FailingServer]:
    server = _FailingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("max_retries", [0, 2])
def test_max_retries_is_the_only_retrying(failing_server, max_retries):
    base_url = f"http://127.0.0.1:{failing_server.server_address[1]}"
    llm = Core(base_url=base_url, api_key="k", max_retries=max_retries)
    with pytest.raises(InternalServerError):
        llm.chat(MESSAGES)
    embedding = CoreEmbedding(base_url=base_url, api_key="k", max_retries=max_retries)
    with pytest.raises(InternalServerError):
        embedding.get_query_embedding("q")

    attempts = max_retries + 1
    assert (
        failing_server.requests
        == [("/v1/core/chat/completions", "Bearer k")] * attempts
        + [("/v1/core/embeddings", "Bearer k")] * attempts
    )
