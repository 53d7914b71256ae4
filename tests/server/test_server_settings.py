"""Server settings from arguments and CORE_SERVER_* variables."""

from __future__ import annotations

import pytest

from backend.server.settings import ServerSettings


def test_defaults():
    settings = ServerSettings.from_env(env={})
    assert settings.max_body_bytes == 8 * 1024 * 1024
    assert settings.keep_alive_interval == 10.0
    assert settings.api_keys == () and not settings.no_auth


def test_environment_then_arguments():
    env = {
        "CORE_SERVER_MAX_CONCURRENT": "2",
        "CORE_SERVER_MAX_QUEUED": "5",
        "CORE_SERVER_REQUEST_TIMEOUT": "12.5",
        "CORE_SERVER_MAX_BODY_BYTES": "1000",
    }
    settings = ServerSettings.from_env(env=env, max_queued=9, request_timeout=None)
    assert (settings.max_concurrent, settings.max_queued) == (2, 9)
    assert settings.request_timeout == 12.5 and settings.max_body_bytes == 1000


def test_keys_never_show_in_the_repr():
    assert "secret" not in repr(ServerSettings(api_keys=("secret",)))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CORE_SERVER_MAX_CONCURRENT": "many"}, "must be a number"),
        ({"CORE_SERVER_MAX_CONCURRENT": "0"}, "at least 1"),
        ({"CORE_SERVER_KEEP_ALIVE_INTERVAL": "-1"}, "positive"),
    ],
)
def test_bad_values_are_refused(env, message):
    with pytest.raises(ValueError, match=message):
        ServerSettings.from_env(env=env)


def test_unknown_arguments_are_refused():
    with pytest.raises(TypeError, match="max_workers"):
        ServerSettings.from_env(env={}, max_workers=3)
