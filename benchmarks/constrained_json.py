"""Decoding under a ``json_schema`` response format against decoding the same JSON freely.

Both sides are the same engine through the public streaming API, on the same prompt token ids:
the constrained request's system message is the one ``render_prompt`` writes for a format (the
default system prompt and the schema), and the free request sends that text as its own system
message, so the model is asked for the same JSON either way and writes about as many tokens.
Greedy, up to ``NEW_TOKENS``; the schema asks for a long answer, so both usually run to the
limit. What is left is the cost of the token masks (``backend.engines.token_mask``).
"""

from __future__ import annotations

import json
import statistics

from backend.backends.local import InProcessBackend
from backend.chat.prompt import DEFAULT_SYSTEM_PROMPT
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL
from benchmarks.chat import NEW_TOKENS, StreamTiming, time_backend_stream
from benchmarks.measure import Figure, interleaved
from benchmarks.texts import chat_prompt

OUTLINE_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "genre": {"type": "string", "enum": ["adventure", "mystery", "comedy", "drama"]},
        "characters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
                "additionalProperties": False,
            },
        },
        "chapters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"heading": {"type": "string"}, "summary": {"type": "string"}},
                "required": ["heading", "summary"],
                "additionalProperties": False,
            },
            "minItems": 6,
        },
    },
    "required": ["title", "genre", "characters", "chapters"],
    "additionalProperties": False,
}
# The same words ``backend.chat.prompt`` adds to the system message for a json_schema format;
# the figure's note records whether both prompts came to the same token count.
ASKING = "Answer with one JSON value valid against this JSON Schema:\n"


def _messages(variant: int, system: bool) -> list[dict]:
    user = {
        "role": "user",
        "content": chat_prompt(variant) + "\nGive the story's outline as JSON.",
    }
    if not system:
        return [user]
    schema = json.dumps(OUTLINE_SCHEMA, ensure_ascii=False)
    return [{"role": "system", "content": f"{DEFAULT_SYSTEM_PROMPT}\n\n{ASKING}{schema}"}, user]


def constrained_vs_unconstrained(
    backend: InProcessBackend, model_name: str, repeats: int
) -> Figure:
    """Decode tokens/s under the schema's grammar vs free decoding of the same request."""
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "outline", "schema": OUTLINE_SCHEMA, "strict": True},
    }
    variants = iter(range(20_000, 30_000))
    timings: dict[str, list[StreamTiming]] = {"free": [], "constrained": []}
    prompt_tokens: dict[int, set[int]] = {}  # per prompt variant, both sides' counts

    def request(kind: str, variant: int) -> dict:
        constrained = kind == "constrained"
        fields = {"response_format": response_format} if constrained else {}
        return {"messages": _messages(variant, system=not constrained), **fields}

    def run(kind: str, variant: int, max_tokens: int = NEW_TOKENS) -> StreamTiming:
        fields = request(kind, variant)
        counted = backend.count_prompt_tokens({"model": DEFAULT_CHAT_MODEL, **fields})
        prompt_tokens.setdefault(variant, set()).add(counted)
        timing = time_backend_stream(backend, variant, max_tokens, **fields)
        timings[kind].append(timing)
        return timing

    # Warm-up: the grammar is compiled once per schema and kept, as a service keeps it.
    run("constrained", -1, 8)
    run("free", -1, 8)
    for kind in timings:
        timings[kind].clear()
    calls: list[int] = []

    def measure(kind: str) -> float:
        # Both runs of a repetition (ABBA order) share a prompt; each repetition has its own.
        if len(calls) % 2 == 0:
            variant = next(variants)
        else:
            variant = calls[-1]
        calls.append(variant)
        return run(kind, variant).decode_rate

    free, constrained = interleaved(
        lambda: measure("free"), lambda: measure("constrained"), repeats
    )
    tokens = {k: statistics.median(t.tokens for t in v) for k, v in timings.items()}
    same = all(len(counts) == 1 for counts in prompt_tokens.values())
    prompt = statistics.median(min(counts) for counts in prompt_tokens.values())
    return Figure(
        "chat_constrained_json_vs_unconstrained",
        "tokens/s",
        free,
        constrained,
        goal=">= 0.9",
        note=f"{model_name}, greedy, <= {NEW_TOKENS} new tokens (median {tokens['constrained']:g} "
        f"constrained, {tokens['free']:g} free), prompt {prompt:g} tokens "
        f"({'the same' if same else 'NOT the same'} on both sides); the json_schema "
        "response_format vs the same request decoded freely",
    )
