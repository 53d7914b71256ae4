"""LangChain's standard integration suites on the real small-profile models, in-process (the
shared session backend) and through a real HTTP server on a loopback port.

The chat model is built as a new user builds it, with the model name only: the spec's
temperature 0.7 and no ``max_tokens``, so these tests also show that sampled answers, tool
calls and structured output (all three methods, json_mode included) end on their own
(``backend.engines.json_bounds``). JSON mode is on, and the structured-output tests run once
for each method that takes a schema (function calling and ``response_format`` json_schema;
json_mode has its own test). No xfails: the two tests the 0.5B model used to fail
(inventing a tool name under tool_choice='any', copying a no-argument tool's schema into its
arguments) pass since calls are decoded under the tools' schemas.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_tests.integration_tests import (
    ChatModelIntegrationTests,
    EmbeddingsIntegrationTests,
    ToolsIntegrationTests,
)

from langchain_core_ext import ChatCore, CoreEmbeddings, CoreGroundednessCheck

pytestmark = pytest.mark.model

CHAT_PARAMS = {"model": "core-1-mini-chat"}  # what a new user writes
#: ``with_structured_output`` methods that take the schema (json_mode has its own test).
SCHEMA_METHODS = ("function_calling", "json_schema")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The suite's structured-output tests run once per method that takes the schema."""
    if "structured_output" in metafunc.function.__name__ and (
        "structured_method" in metafunc.fixturenames
    ):
        metafunc.parametrize("structured_method", SCHEMA_METHODS, indirect=True)


class _InProcess:
    """Runs a suite on the session's small-profile backend (models loaded once)."""

    @pytest.fixture(autouse=True)
    def _service(self, small_backend: Any) -> None:
        self.connection: dict[str, Any] = {"backend": small_backend}


class _OverHTTP:
    """Runs a suite against the server fixture, configured through the environment."""

    @pytest.fixture(autouse=True)
    def _service(self, core_env_for_http: str) -> None:
        self.connection = {}  # CORE_BASE_URL and CORE_API_KEY are set


class _ChatSuite(ChatModelIntegrationTests):
    connection: dict[str, Any]
    method: str

    @pytest.fixture(autouse=True)
    def structured_method(self, request: pytest.FixtureRequest) -> str:
        self.method = getattr(request, "param", "function_calling")
        return self.method

    @property
    def structured_output_kwargs(self) -> dict[str, Any]:
        return {"method": self.method}

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ChatCore

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {**CHAT_PARAMS, **self.connection}

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def model_override_value(self) -> str:
        return "core-1-mini-chat-ja"


class TestChatCoreInProcess(_InProcess, _ChatSuite):
    pass


class TestChatCoreOverHTTP(_OverHTTP, _ChatSuite):
    """Over HTTP the structured-output tests run for one schema type, and those for pydantic
    v1 and optional fields in-process only (``conftest.in_process_only``): turning a pydantic
    model, a TypedDict or a JSON Schema into the request's tools or ``response_format`` is
    the adapter's work, done before any transport, and parsing the answer likewise after it;
    each method's schema still crosses the wire here, invoked, streamed and asynchronously."""


class _EmbeddingsSuite(EmbeddingsIntegrationTests):
    connection: dict[str, Any]

    @property
    def embeddings_class(self) -> type[CoreEmbeddings]:
        return CoreEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return dict(self.connection)


class TestCoreEmbeddingsInProcess(_InProcess, _EmbeddingsSuite):
    pass


class TestCoreEmbeddingsOverHTTP(_OverHTTP, _EmbeddingsSuite):
    pass


class _ToolsSuite(ToolsIntegrationTests):
    connection: dict[str, Any]

    @property
    def tool_constructor(self) -> type[CoreGroundednessCheck]:
        return CoreGroundednessCheck

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return dict(self.connection)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {
            "context": "The Eiffel Tower is in Paris.",
            "answer": "The Eiffel Tower is in Paris.",
        }


class TestCoreGroundednessCheckInProcess(_InProcess, _ToolsSuite):
    pass


class TestCoreGroundednessCheckOverHTTP(_OverHTTP, _ToolsSuite):
    pass
