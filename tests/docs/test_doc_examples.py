"""Every Python example of README.md and docs/ runs, so that one that stops working fails the
suite (``tests/docs/markdown_examples.py`` says how blocks are found and marked not to run).

A page's blocks run in order in one namespace, as a reader runs them one after the other. All
pages share the session's small-profile backend through one server on loopback: the examples
written for a local server (``http://127.0.0.1:8000``, the key in ``.core-api-keys``) reach it,
and the in-process ones do too, through ``CORE_BASE_URL`` and ``CORE_API_KEY``, so that the
models load once for the whole suite.
"""

from __future__ import annotations

import re

import pytest

from tests.docs.markdown_examples import ROOT, documentation_pages, examples

DOCUMENTED_SERVER = "http://127.0.0.1:8000"
PAGES = [page for page in documentation_pages() if examples(page)]


def test_every_page_with_examples_is_collected() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "docs/getting-started.md", "docs/guides/groundedness.md"} <= names


def test_a_block_not_run_says_why() -> None:
    for page in documentation_pages():
        for example in examples(page):
            assert example.not_run is None or example.not_run.strip(), example.where


@pytest.fixture
def llamaindex_settings_restored():
    """The LlamaIndex guide sets the global ``Settings``; the suite's other tests must not see
    its models."""
    import llama_index.core
    from llama_index.core import Settings

    saved = (Settings._llm, Settings._embed_model, llama_index.core.global_tokenizer)
    yield
    Settings._llm, Settings._embed_model, llama_index.core.global_tokenizer = saved


@pytest.mark.model
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_examples_run(
    page, real_server, monkeypatch, tmp_path, llamaindex_settings_restored
) -> None:
    monkeypatch.setenv("CORE_BASE_URL", real_server.url)
    monkeypatch.setenv("CORE_API_KEY", real_server.api_key)
    monkeypatch.chdir(tmp_path)  # files the examples write (a result store) land here
    (tmp_path / ".core-api-keys").write_text(real_server.api_key + "\n")

    namespace: dict = {"__name__": "__docs_example__"}
    ran = 0
    for example in examples(page):
        if example.not_run:
            continue
        code = example.code.replace(DOCUMENTED_SERVER, real_server.url)
        # Line numbers of a traceback are the page's own.
        compiled = compile("\n" * (example.line - 1) + code, str(example.path), "exec")
        exec(compiled, namespace)  # noqa: S102 - the documentation's own examples
        ran += 1
    if not ran:
        pytest.skip(f"{page.name}: every block is marked not to run")


def test_python_examples_use_the_fence_the_collector_reads() -> None:
    # A block fenced as ```py or ```python3 would be shown as Python but never run.
    other = re.compile(r"^```\s*(py|python3|ipython|pycon)\s*$")
    for page in documentation_pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            assert not other.match(line), f"{page.relative_to(ROOT)}:{number}: use ```python"
