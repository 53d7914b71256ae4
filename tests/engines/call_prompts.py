"""A constrained tool call's prompt, as the chat layer builds it: the chat template with the
one tool offered, the call's opening prefilled, and the constraint its schema gives."""

from __future__ import annotations

from backend.chat.tool_calls import call_constraint, call_prefill
from backend.protocol.schemas import ToolDefinition


def constrained_call(tokenizer, question: str, name: str, parameters: dict):
    """The prompt's token ids and the call's constraint, for ``question`` with the tool
    ``name`` taking ``parameters`` offered alone."""
    tool = ToolDefinition.model_validate(
        {"type": "function", "function": {"name": name, "parameters": parameters}}
    )
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}],
        tools=[tool.model_dump(exclude_none=True)],
        add_generation_prompt=True,
        tokenize=False,
    )
    prompt = tokenizer.encode(text + call_prefill(None, constrained=True), add_special_tokens=False)
    return prompt, call_constraint([tool])
