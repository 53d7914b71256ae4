"""Yes/no settings from the environment (``flag_from_env``): what is given wins, then the
variable, then the default for when it is unset (offline)."""

from __future__ import annotations

import pytest

from backend.engines.request_runner import flag_from_env

NAME = "CORE_TEST_FLAG"


@pytest.mark.parametrize(
    ("configured", "given", "unset", "expected"),
    [
        (None, None, False, False),
        (None, None, True, True),  # CORE_CUDA_GRAPHS on a CUDA device
        ("0", None, True, False),
        ("off", None, True, False),
        ("yes", None, False, True),
        ("1", False, True, False),  # an argument wins over the variable
        (None, True, False, True),
    ],
)
def test_a_flag_is_the_argument_then_the_variable_then_the_default(
    monkeypatch, configured, given, unset, expected
):
    if configured is None:
        monkeypatch.delenv(NAME, raising=False)
    else:
        monkeypatch.setenv(NAME, configured)
    assert flag_from_env(NAME, given, unset=unset) is expected


def test_a_flag_that_is_neither_yes_nor_no_is_refused(monkeypatch):
    monkeypatch.setenv(NAME, "maybe")
    with pytest.raises(ValueError, match="CORE_TEST_FLAG must be"):
        flag_from_env(NAME)
