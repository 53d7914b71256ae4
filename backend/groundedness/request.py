"""The groundedness check as a client asks for it: one request builder and one verdict reader,
used by the command line, the bulk runner and both adapters.

A check is a chat request to the groundedness model (spec 4.2): the context is the user
message and the response to check is the assistant message; the answer's content is the
verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.groundedness_report import CONTEXT_SEPARATOR
from backend.protocol.schemas import ChatCompletion, Verdict

VERDICTS: tuple[str, ...] = get_args(Verdict)
__all__ = ["CONTEXT_SEPARATOR", "VERDICTS", "groundedness_request", "read_verdict"]


def groundedness_request(
    context: str | Sequence[str],
    response: str,
    *,
    model: str = GROUNDEDNESS_MODEL,
    separator: str = CONTEXT_SEPARATOR,
    **fields: Any,
) -> dict[str, Any]:
    """The check's request body: ``context`` (a text, or texts joined by ``separator``) as the
    user message, ``response`` as the assistant's; ``fields`` are added to the body."""
    if not isinstance(context, str):
        context = separator.join(context)
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": context},
            {"role": "assistant", "content": response},
        ],
        **fields,
    }


def read_verdict(completion: ChatCompletion) -> Verdict:
    """The verdict a check answered with.

    Raises:
        ValueError: the answer is not one of ``grounded``, ``notGrounded`` or ``notSure``.
    """
    content = completion.choices[0].message.content if completion.choices else None
    verdict = (content or "").strip()
    if verdict not in VERDICTS:
        raise ValueError(f"the groundedness check answered {verdict!r}, not a verdict")
    return verdict  # type: ignore[return-value]
