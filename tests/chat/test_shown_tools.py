"""The offered tools as the model is shown them, offline: what LlamaIndex and pydantic add to a
definition on their own (a signature line, titles made from parameter names) is left out, so
a function gets the same prompt through either framework (``backend.chat.shown_tools``)."""

from __future__ import annotations

import json

from langchain_core.utils.function_calling import convert_to_openai_tool
from llama_index.core.tools import FunctionTool

from backend.chat.prompt import render_prompt
from backend.chat.shown_tools import shown_description, shown_tools
from backend.protocol.schemas import ChatMessage, ToolDefinition
from backend.testing.engines import CharTokenizer


def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value between units: km/miles, kg/lb, celsius/fahrenheit."""
    return f"{value} {from_unit} in {to_unit}"


class ToolsSeen(CharTokenizer):
    """Notes the tools the chat template is given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def apply_chat_template(self, conversation, tools=None, **options):
        self.seen.append(json.dumps(tools, sort_keys=True))
        return super().apply_chat_template(conversation, tools, **options)


def _template_tools(tool: ToolDefinition) -> str:
    tokenizer = ToolsSeen()
    messages = [ChatMessage(role="user", content="5 km in miles?")]
    render_prompt(tokenizer, messages, [tool], "auto", constrained=True)
    return tokenizer.seen[0]


def _definition(name: str, description: str, parameters: dict) -> ToolDefinition:
    function = {"name": name, "description": description, "parameters": parameters}
    return ToolDefinition.model_validate({"type": "function", "function": function})


def test_a_function_is_shown_the_same_through_langchain_and_llamaindex():
    langchain = ToolDefinition.model_validate(convert_to_openai_tool(convert_units))
    llamaindex = ToolDefinition.model_validate(
        FunctionTool.from_defaults(convert_units).metadata.to_openai_tool()
    )
    assert llamaindex != langchain  # as the frameworks send them
    assert llamaindex.function.description.startswith("convert_units(value: ")
    assert shown_tools([llamaindex]) == shown_tools([langchain]) == [langchain]
    assert _template_tools(llamaindex) == _template_tools(langchain)


def test_a_definition_with_nothing_added_is_the_same_object():
    tool = ToolDefinition.model_validate(convert_to_openai_tool(convert_units))
    assert shown_tools([tool])[0] is tool


def test_a_description_that_is_a_signature_alone_is_kept():
    assert shown_description("ping", "ping(host: str)") == "ping(host: str)"
    assert shown_description("ping", "ping(host: str)\nSend one echo request.") == (
        "Send one echo request."
    )
    # Another tool's signature, or one further down, is the author's text.
    assert shown_description("ping", "pong(x)\nReply.") == "pong(x)\nReply."
    assert shown_description("ping", None) is None


def test_only_titles_made_from_the_parameter_name_are_left_out():
    tool = _definition(
        "book_trip",
        "Book a trip.",
        {
            "type": "object",
            "title": "book_trip",
            "properties": {
                "from_city": {"type": "string", "title": "From City"},
                "when": {"type": "string", "title": "Departure date, YYYY-MM-DD"},
                "traveller": {
                    "type": "object",
                    "title": "Traveller",
                    "properties": {"full_name": {"type": "string", "title": "Full Name"}},
                },
                "stops": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"city_code": {"type": "string", "title": "City Code"}},
                    },
                },
            },
        },
    )
    parameters = shown_tools([tool])[0].function.parameters
    assert parameters["title"] == "book_trip"  # the schema's own title, not a parameter's
    properties = parameters["properties"]
    assert properties["from_city"] == {"type": "string"}
    assert properties["when"]["title"] == "Departure date, YYYY-MM-DD"
    assert "title" not in properties["traveller"]
    assert properties["traveller"]["properties"]["full_name"] == {"type": "string"}
    assert properties["stops"]["items"]["properties"]["city_code"] == {"type": "string"}
    assert tool.function.parameters["properties"]["from_city"]["title"] == "From City"
