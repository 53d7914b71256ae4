"""After tool results, the answer without a call, asked for in the agent prompt itself: the
conversation as the tools were offered, then a system turn that restates the user's question
and asks for its answer from the results, the first token held from opening a call.

This is what a reply answers from where the chain-state reading finds the chain done, where
the model ends its turn at once or writes a result itself, and where every call it made is
dropped (``backend.chat.generation``). Its prompt begins with the agent prompt that the
reading (or the free answer) has just evaluated, so only the asking turn is evaluated before
the answer. The results rewritten as a user turn in a prompt without tools
(``prompt._with_tool_results_as_user_turn``) was evaluated whole, from its system message on.

The turn is the system's, and restates the question. Asked in a user turn to answer "using
these results", the 1.5B model often replied that it had no results, and answered Korean
questions in English; both readings are in benchmarks/README.md ("The answer after a done
chain"), measured on the development tasks only.

Where the chat template cannot render a system message after the first one (it raises), or
the reply follows a ``response_format`` (whose JSON would open like a call), the results are
shown as a user turn without tools, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jinja2 import TemplateError

from backend.protocol.schemas import ChatMessage

#: The asking turn; ``{question}`` is the last user message.
ASK_FOR_THE_ANSWER = "Using the tool results above, answer the user's question: {question}"


def answer_from_results(
    tokenizer: Any,
    conversation: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    messages: Sequence[ChatMessage],
) -> str | None:
    """The prompt text of the answer from the results: ``conversation`` rendered with
    ``tools`` as the agent prompt is, and the asking turn. None where the conversation has no
    question or the template cannot render the turn."""
    question = next((m.content for m in reversed(messages) if m.role == "user"), None)
    if not question:
        return None
    ask = {"role": "system", "content": ASK_FOR_THE_ANSWER.format(question=question)}
    try:
        return tokenizer.apply_chat_template(
            [*conversation, ask], tools=tools, add_generation_prompt=True, tokenize=False
        )
    except TemplateError:
        return None
