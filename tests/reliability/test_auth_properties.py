"""Authentication under fuzzing, and keys kept out of logs and responses.

Cited rather than repeated: the fixed list of path spellings and bad headers
(``tests/server/test_server_auth.py::test_every_v1_spelling_needs_the_key``, which also checks
the keys are not echoed), operational paths without a key, and the path normaliser.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from backend.protocol.errors import AuthenticationError
from backend.server.auth import BearerAuth, normalise_path, requires_key
from backend.testing import EchoChatEngine, offline_backend
from backend.testing.servers import running_server
from tests.reliability.wire import CHAT_PATH, chat_body
from tests.server.helpers import API_KEY, OTHER_KEY
from tests.server.test_server_auth import raw_request

SEGMENTS = [
    "v1",
    "core",
    "models",
    "chat",
    "completions",
    "embeddings",
    "..",
    ".",
    "",
    "health",
    "x",
]
SEPARATORS = ["/", "//", "\\", "/./", "%2F", "%2f", "%5C"]
NOT_KEYS = st.sampled_from(
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic abc",
        f"Bearer {API_KEY[:-1]}",
        f"Bearer {API_KEY}0",
        f"Token {API_KEY}",
        f"Bearer  {API_KEY} x",
    ]
) | st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40).map(
    lambda token: f"Bearer {token}"
)


def _spell(segment: str, encode: int, upper: int) -> str:
    """``segment`` with some letters upper-cased and some percent-encoded (once or twice)."""
    out = ""
    for i, char in enumerate(segment):
        char = char.upper() if upper >> i & 1 else char
        if encode >> i & 1:
            char = quote(char, safe="") if char not in ".~-_" else f"%{ord(char):02X}"
            char = char.replace("%", "%25") if encode >> (i + 8) & 1 else char
        out += char
    return out


@st.composite
def v1_targets(draw: st.DrawFn) -> str:
    """Request targets that a lenient reader would take as a ``/v1`` path."""
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5))
    parts.insert(draw(st.integers(0, len(parts))), "v1")
    target = ""
    for part in parts:
        spelled = _spell(part, draw(st.integers(0, 2**16)), draw(st.integers(0, 255)))
        target += draw(st.sampled_from(SEPARATORS)) + spelled
    target = "/" + target.lstrip("/\\")
    return target + draw(st.sampled_from(["", "/", "?a=1", "#x"]))


@pytest.fixture(scope="module")
def server():
    with running_server(
        offline_backend(EchoChatEngine()), api_keys=(API_KEY, OTHER_KEY)
    ) as running:
        yield running


@settings(max_examples=150, deadline=None, database=None)
@given(target=v1_targets(), header=st.none() | NOT_KEYS, method=st.sampled_from(["GET", "POST"]))
@example(target="/v1/..#x", header=None, method="GET")  # the fragment is not sent: "/v1/.." is "/"
def test_no_v1_spelling_gets_in_without_a_key(server, figures, target, header, method):
    figures["auth fuzz cases run"] = figures.get("auth fuzz cases run", 0) + 1
    headers = {} if header is None else {"Authorization": header}
    body = b'{"model": "core-1-mini-chat"}' if method == "POST" else None
    status, _, raw = raw_request(server.url, method, target, headers, body)
    path = target.split("?")[0].split("#")[0]  # the path as the server reads it
    if requires_key(path):
        assert status == 401, (target, normalise_path(target), status, raw[:200])
    else:
        assert status in (401, 404, 405), (target, status)  # never routed to a /v1 endpoint
    assert API_KEY.encode() not in raw and OTHER_KEY.encode() not in raw


def test_keys_are_never_logged(server, caplog):
    caplog.set_level(logging.DEBUG)
    requests = [
        {"Authorization": f"Bearer {API_KEY}"},
        {"Authorization": f"Bearer {OTHER_KEY}"},
        {"Authorization": f"Bearer {API_KEY}-but-wrong"},
        {"Authorization": API_KEY},
    ]
    for headers in requests:
        for content in ("hi", EchoChatEngine.OUT_OF_MEMORY):  # an answer and a logged 500
            body = json.dumps(chat_body(content)).encode()
            raw_request(server.url, "POST", CHAT_PATH, headers, body)
    assert "failed" in caplog.text  # the 500s were logged...
    assert API_KEY not in caplog.text and OTHER_KEY not in caplog.text  # ...without the keys


@pytest.mark.parametrize("presented", [API_KEY, OTHER_KEY, "wrong", API_KEY[:4], API_KEY * 3])
def test_every_key_is_compared_in_constant_time(monkeypatch, presented):
    compared: list[tuple[bytes, bytes]] = []
    constant_time = hmac.compare_digest

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare_digest)
    auth = BearerAuth([API_KEY, OTHER_KEY, "third-key"])
    with contextlib.suppress(AuthenticationError):  # only the comparisons matter here
        auth.check(f"Bearer {presented}")
    # every accepted key, whichever matches and wherever: no early exit to time
    assert [key for _, key in compared] == [API_KEY.encode(), OTHER_KEY.encode(), b"third-key"]
    assert all(sent == presented.encode() for sent, _ in compared)
