"""LangChain's standard integration suites on the real small-profile models, in-process (the
shared session backend) and through a real HTTP server on a loopback port.

Generation is kept short so the suites stay fast on a CPU: temperature 0, 8 new tokens where
any text will do, more where a whole tool call or JSON object must fit. JSON mode is on, and
the structured-output tests run once for each method that takes a schema (function calling
and ``response_format`` json_schema; json_mode has its own test). No xfails: the two
tests the 0.5B model used to fail (inventing a tool name under tool_choice='any', copying a
no-argument tool's schema into its arguments) pass since calls are decoded under the tools'
schemas.
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

CHAT_PARAMS = {"model": "core-1-mini-chat", "temperature": 0}
# New-token budgets by what a test needs to see whole (the first matching name wins).
_TOKEN_BUDGETS = (
    # The model pastes the tool's whole docstring into the description argument.
    (("unicode",), 128),
    (("structured_output", "json_mode"), 64),  # a whole JSON object
    # tool_choice='any' with two tools: the reply may call both (parallel_tool_calls).
    (("tool_choice",), 64),
    (("tool_calling", "bind_runnables", "agent_loop", "few_shot"), 32),  # a call
)
SHORT_REPLY_TOKENS = 8  # any non-empty text will do
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
    max_tokens: int
    method: str

    @pytest.fixture(autouse=True)
    def _token_budget(self, request: pytest.FixtureRequest) -> None:
        name = request.node.name
        self.max_tokens = next(
            (budget for words, budget in _TOKEN_BUDGETS if any(w in name for w in words)),
            SHORT_REPLY_TOKENS,
        )

    @pytest.fixture(autouse=True)
    def structured_method(self, request: pytest.FixtureRequest) -> str:
        self.method = getattr(request, "param", "function_calling")
        return self.method

    @property
    def structured_output_kwargs(self) -> dict[str, Any]:
        return {"method": self.method}

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ChatCore

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {**CHAT_PARAMS, "max_tokens": self.max_tokens, **self.connection}

    @property
    def model_override_value(self) -> str:
        return "core-1-mini-chat-ja"


class TestChatCoreInProcess(_InProcess, _ChatSuite):
    pass


class TestChatCoreOverHTTP(_OverHTTP, _ChatSuite):
    pass


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
