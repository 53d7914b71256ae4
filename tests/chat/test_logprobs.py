"""Log-probabilities without a model: the chooser's numbers, token bytes and texts, which
events carry which entries (stop sequences, tool calls, the end of turn), the wire shape
streamed and whole, and the 400s of bad requests."""

from __future__ import annotations

import math

import pytest
import torch

from backend.chat.logprobs import TokenBytes, TokenLogprobsReader, token_text
from backend.chat.output import Finished, OutputProcessor, TextDelta, ToolCallsFound
from backend.engines.base import SamplingParams
from backend.engines.logprobs import ScoredToken, scored_token
from backend.engines.sampling import choose_token
from backend.protocol.errors import BadRequestError
from backend.testing import ScriptedChatEngine, offline_backend
from backend.testing.engines import EOS, CharTokenizer

ASK = {
    "model": "core-1-mini-chat",
    "messages": [{"role": "user", "content": "hi"}],
    "logprobs": True,
    "top_logprobs": 2,
}
TOOL_REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n</tool_call>'


# ---------------------------------------------------------------- the chooser's numbers


def test_a_scored_token_is_the_chosen_id_with_its_alternatives_most_likely_first():
    logprobs = torch.log_softmax(torch.tensor([1.0, 3.0, 2.0, float("-inf")]), dim=-1)
    token = scored_token(logprobs, 1, top_n=10)
    assert token == 1 and isinstance(token, int)
    assert token.logprob == pytest.approx(float(logprobs[1]))
    assert [i for i, _ in token.top] == [1, 2, 0]  # the forbidden token is not listed
    assert scored_token(logprobs, 2, top_n=0).top == ()


def test_a_chosen_token_tied_with_another_comes_first_among_them():
    logprobs = torch.log_softmax(torch.tensor([2.0, 2.0, 2.0, 0.0]), dim=-1)
    for chosen in range(3):
        assert scored_token(logprobs, chosen, top_n=3).top[0][0] == chosen


def test_the_chooser_scores_only_when_asked_and_before_temperature():
    logits = torch.tensor([0.5, 2.0, 1.0, -1.0])
    plain = choose_token(logits.clone(), SamplingParams(max_new_tokens=1))
    assert type(plain) is int and plain == 1
    hot = SamplingParams(max_new_tokens=1, temperature=2.0, seed=1, top_logprobs=4)
    token = choose_token(logits.clone(), hot, generator=torch.Generator().manual_seed(1))
    raw = torch.log_softmax(logits, dim=-1)
    assert isinstance(token, ScoredToken)
    assert token.logprob == pytest.approx(float(raw[token]))
    assert sum(math.exp(logprob) for _, logprob in token.top) == pytest.approx(1.0)


# ---------------------------------------------------------------- token bytes and texts


def _byte_level_tokenizer():
    """A byte-level BPE tokenizer (GPT-2's and Qwen's kind) with a token holding the first
    two of the three bytes of 日, and one for " h"."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for piece in ("æĹ", "Ġh", "<|end|>"):
        vocab[piece] = len(vocab)
    model = Tokenizer(models.BPE(vocab, [("æ", "Ĺ"), ("Ġ", "h")]))
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=model, eos_token="<|end|>")


def test_token_bytes_come_from_the_byte_decoder_even_for_part_of_a_character():
    tokenizer = _byte_level_tokenizer()
    ids = tokenizer.encode(" h日", add_special_tokens=False)
    token_bytes = TokenBytes(tokenizer)
    assert [token_bytes(i) for i in ids] == [b" h", b"\xe6\x97", b"\xa5"]
    assert b"".join(token_bytes(i) for i in ids).decode() == " h日"
    assert token_bytes(tokenizer.eos_token_id) == b"<|end|>"


def test_a_token_text_is_its_bytes_as_utf8_with_a_partial_character_replaced():
    assert token_text(b" h") == " h"
    assert token_text("日".encode()) == "日"
    assert token_text(b"\xe6\x97") == "\ufffd"


def test_the_reader_gives_openai_entries_and_refuses_a_token_without_numbers():
    reader = TokenLogprobsReader(CharTokenizer())
    entry = reader(ScoredToken(ord("é"), -0.5, ((ord("é"), -0.5), (ord("e"), -1.5))))
    assert entry.model_dump() == {
        "token": "é",
        "logprob": -0.5,
        "bytes": [0xC3, 0xA9],
        "top_logprobs": [
            {"token": "é", "logprob": -0.5, "bytes": [0xC3, 0xA9]},
            {"token": "e", "logprob": -1.5, "bytes": [ord("e")]},
        ],
    }
    with pytest.raises(TypeError, match="without its log-probabilities"):
        reader(ord("e"))


# ---------------------------------------------------------------- which events carry what


def _process(text: str, **options) -> list:
    processor = OutputProcessor(
        CharTokenizer(), frozenset({EOS}), logprobs=TokenLogprobsReader(CharTokenizer()), **options
    )
    events = []
    for token in [ord(c) for c in text] + [EOS]:
        events += processor.feed(ScoredToken(token, -0.1, ((token, -0.1),)))
        if processor.stopped:
            break
    return events + processor.finish()


def test_each_delta_carries_the_entries_of_the_text_it_releases():
    events = _process("Hello there", stop=["the"])
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "Hello "
    for delta in deltas:  # a held-back stop prefix waits with its tokens' entries
        assert "".join(entry.token for entry in delta.logprobs) == delta.text
    assert events[-1] == Finished("stop", 9)  # "t", "h", "e" are cut: not sent


def test_a_tool_call_carries_the_entries_of_every_token_generated_for_it():
    events = _process(TOOL_REPLY, tool_names=frozenset({"get_weather"}))
    [found] = [e for e in events if isinstance(e, ToolCallsFound)]
    assert "".join(entry.token for entry in found.logprobs) == TOOL_REPLY
    assert not any(isinstance(e, TextDelta) for e in events) and not events[-1].logprobs


# ---------------------------------------------------------------- the wire, streamed and not


def test_logprobs_are_null_unless_asked_streamed_or_not():
    service = offline_backend(ScriptedChatEngine("Hello."))
    plain = {key: value for key, value in ASK.items() if "logprobs" not in key}
    assert service.chat(plain).choices[0].logprobs is None
    with service.stream_chat(plain) as chunks:
        assert all(c.choices[0].logprobs is None for c in chunks if c.choices)


def test_streamed_entries_equal_the_whole_answers_and_spell_its_content():
    service = offline_backend(ScriptedChatEngine("Héllo, 日本."))
    whole = service.chat(ASK).choices[0]
    assert "".join(e.token for e in whole.logprobs.content) == whole.message.content
    assert all(len(e.top_logprobs) == 1 for e in whole.logprobs.content)  # the script's one
    with service.stream_chat(ASK) as chunks:
        chunks = list(chunks)
    assert chunks[0].choices[0].logprobs is None  # the role chunk
    for chunk in chunks[1:-1]:
        choice = chunk.choices[0]
        assert "".join(e.token for e in choice.logprobs.content) == choice.delta.content
    streamed = [e for c in chunks if c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert streamed == whole.logprobs.content


def test_top_logprobs_zero_lists_no_alternatives():
    service = offline_backend(ScriptedChatEngine("Hi"))
    entries = service.chat({**ASK, "top_logprobs": 0}).choices[0].logprobs.content
    assert [e.top_logprobs for e in entries] == [[], []]
    assert [
        e.top_logprobs
        for e in service.chat({**ASK, "top_logprobs": None}).choices[0].logprobs.content
    ] == [[], []]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"top_logprobs": 21}, "top_logprobs must be between 0 and 20, got 21"),
        ({"top_logprobs": -1}, "top_logprobs must be between 0 and 20, got -1"),
        ({"logprobs": None, "top_logprobs": 3}, "top_logprobs needs logprobs set to true"),
        ({"logprobs": False, "top_logprobs": 0}, "top_logprobs needs logprobs set to true"),
        (
            {"model": "core-1-mini-groundedness-check"},
            "logprobs are not available for the groundedness check",
        ),
    ],
)
def test_bad_logprobs_requests_are_400_saying_why(fields, message):
    service = offline_backend(ScriptedChatEngine("yes"))
    request = {**ASK, **fields}
    if "groundedness" in request["model"]:
        request["messages"] = [
            {"role": "user", "content": "The sky is blue."},
            {"role": "assistant", "content": "The sky is blue."},
        ]
    with pytest.raises(BadRequestError, match=message) as raised:
        service.chat(request)
    assert raised.value.status_code == 400
    assert raised.value.message.startswith("invalid request: ")
