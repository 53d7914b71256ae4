"""Bearer-key authentication: every /v1 spelling needs the key, keys are never echoed."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from backend.server.app import create_app
from backend.server.auth import BearerAuth, load_api_keys, normalise_path, requires_key
from backend.server.runner import run_server
from backend.server.settings import ServerSettings
from backend.testing import offline_backend
from backend.testing.servers import running_server
from tests.server.helpers import API_KEY, OTHER_KEY


def raw_request(
    url: str,
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """Send ``target`` exactly as written (httpx would normalise odd paths)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


V1_TARGETS = [
    ("GET", "/v1/core/models"),
    ("POST", "/v1/core/chat/completions"),
    ("POST", "/v1/core/embeddings"),
    ("GET", "//v1/core/models"),
    ("GET", "/v1//core/models"),
    ("GET", "/v1/core/../core/models"),
    ("GET", "/./v1/core/models"),
    ("GET", "/health/../v1/core/models"),
    ("GET", "/V1/core/models"),
    ("GET", "/v1/CORE/MODELS"),
    ("GET", "/%76%31/core/models"),
    ("GET", "/v1/core/%6dodels"),
    ("GET", "/%2576%2531/core/models"),
    ("GET", "/v1%2Fcore%2Fmodels"),
    ("GET", "/v1\\core\\models"),
    ("GET", "/v1/core/models/"),
    ("GET", "/v1/core/models?limit=1"),
    ("GET", "/v1/nothing-here"),
    ("GET", "/v1"),
]

BAD_HEADERS = {
    "missing": {},
    "empty": {"Authorization": ""},
    "wrong key": {"Authorization": "Bearer not-the-key"},
    "key prefix": {"Authorization": f"Bearer {API_KEY[:-1]}"},
    "key with suffix": {"Authorization": f"Bearer {API_KEY}x"},
    "no scheme": {"Authorization": API_KEY},
    "basic scheme": {"Authorization": f"Basic {API_KEY}"},
    "two tokens": {"Authorization": f"Bearer {API_KEY} {API_KEY}"},
    "scheme only": {"Authorization": "Bearer"},
}


@pytest.fixture(scope="module")
def server():
    with running_server(api_keys=(API_KEY, OTHER_KEY)) as running:
        yield running


@pytest.mark.parametrize(("method", "target"), V1_TARGETS)
@pytest.mark.parametrize("header", sorted(BAD_HEADERS))
def test_every_v1_spelling_needs_the_key(server, method, target, header):
    body = b'{"model": "core-1-mini-chat"}' if method == "POST" else None
    status, headers, raw = raw_request(server.url, method, target, BAD_HEADERS[header], body)
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert headers["x-request-id"]
    error = json.loads(raw)["error"]
    assert error["type"] == "authentication_error"
    assert set(error) == {"message", "type", "param", "code"}
    assert API_KEY not in raw.decode() and "not-the-key" not in raw.decode()


def test_absolute_form_target_needs_the_key(server):
    status, _, _ = raw_request(server.url, "GET", f"{server.url}/v1/core/models")
    assert status == 401


@pytest.mark.parametrize("key", [API_KEY, OTHER_KEY])
def test_each_configured_key_is_accepted(server, key):
    status, _, raw = raw_request(
        server.url, "GET", "/v1/core/models", {"Authorization": f"Bearer {key}"}
    )
    assert status == 200 and json.loads(raw)["object"] == "list"


def test_the_scheme_is_case_insensitive(server):
    status, _, _ = raw_request(
        server.url, "GET", "/v1/core/models", {"Authorization": f"bearer {API_KEY}"}
    )
    assert status == 200


def test_odd_spellings_with_the_key_are_routed_or_404(server):
    auth = {"Authorization": f"Bearer {API_KEY}"}
    assert raw_request(server.url, "GET", "/v1/core/%6dodels", auth)[0] == 200
    for target in ("//v1/core/models", "/V1/core/models", "/v1/core/models/"):
        status, _, raw = raw_request(server.url, "GET", target, auth)
        assert status == 404 and json.loads(raw)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("target", ["/health", "/metrics", "/openapi.json"])
def test_operational_paths_need_no_key(server, target):
    assert raw_request(server.url, "GET", target)[0] == 200


def test_unknown_path_outside_v1_is_a_404_error_object(server):
    status, _, raw = raw_request(server.url, "GET", "/nope")
    assert status == 404
    assert json.loads(raw) == {
        "error": {
            "message": "unknown path: GET /nope",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def test_no_auth_serves_without_a_key(serve):
    running = serve(api_keys=(), no_auth=True)
    assert raw_request(running.url, "GET", "/v1/core/models")[0] == 200


def test_the_app_refuses_to_start_without_keys():
    with pytest.raises(ValueError, match="no API keys"):
        create_app(offline_backend(), ServerSettings())


def test_run_server_refuses_to_start_without_keys(monkeypatch):
    monkeypatch.delenv("CORE_API_KEYS", raising=False)
    with pytest.raises(ValueError, match="no API keys"):
        run_server(port=0)


def test_keys_come_from_the_environment_and_the_key_file(tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text("# team keys\nfile-key-1\n\n  file-key-2  \nenv-key\n")
    keys = load_api_keys(key_file, env={"CORE_API_KEYS": "env-key, other-env-key,"})
    assert keys == ("env-key", "other-env-key", "file-key-1", "file-key-2")
    with pytest.raises(FileNotFoundError):
        load_api_keys(tmp_path / "missing")


def test_the_key_check_compares_every_key():
    auth = BearerAuth(["a" * 32, "b" * 32])
    auth.check("Bearer " + "b" * 32)
    with pytest.raises(Exception, match="invalid API key"):
        auth.check("Bearer " + "c" * 32)


@pytest.mark.parametrize(
    ("path", "normalised"),
    [
        ("//v1/core/models", "/v1/core/models"),
        ("/v1/core/../core/./models", "/v1/core/models"),
        ("/%2576%2531/x", "/v1/x"),
        ("\\V1\\Core", "/v1/core"),
        ("/../../v1", "/v1"),
    ],
)
def test_normalise_path(path, normalised):
    assert normalise_path(path) == normalised
    assert requires_key(path)


@pytest.mark.parametrize("path", ["/health", "/metrics", "/openapi.json", "/docs", "/v2/x", "/v10"])
def test_paths_outside_v1_need_no_key(path):
    assert not requires_key(path)
