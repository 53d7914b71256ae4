import pytest

from backend.protocol.catalogue import (
    CATALOGUE,
    InputType,
    Operation,
    embedding_model,
    find_model,
    model_list,
    resolve_model,
    serving_card,
)
from backend.protocol.errors import BadRequestError, NotFoundError

ALIASES = {
    "core-1-mini-chat": "core-1-mini-chat-240502",
    "core-1-mini-chat-ja": "core-1-mini-chat-ja-240510",
    "core-1-mini-groundedness-check": "core-1-mini-groundedness-check-240502",
}


def test_catalogue_holds_the_seven_models_of_the_spec():
    assert [c.name for c in CATALOGUE] == [
        "core-1-mini-chat",
        "core-1-mini-chat-ja",
        "core-1-mini-groundedness-check",
        "core-embedding-1-large-query",
        "core-embedding-1-large-passage",
        "core-1-mini-embedding-query",
        "core-1-mini-embedding-passage",
    ]
    statuses = {c.name: (c.status, c.release_date.isoformat(), c.context_length) for c in CATALOGUE}
    assert statuses["core-1-mini-chat-ja"] == ("beta", "2024-05-16", 32768)
    assert statuses["core-embedding-1-large-query"] == ("beta", "2024-05-10", 4000)
    assert statuses["core-1-mini-embedding-passage"] == ("deprecated", "2024-03-12", 4000)


@pytest.mark.parametrize(("alias", "version"), ALIASES.items())
def test_aliases_resolve_to_versioned_names_and_versions_are_accepted(alias, version):
    assert find_model(alias).version == version
    assert find_model(version) is find_model(alias)


def test_deprecated_embedding_models_are_served_by_their_replacements():
    old = find_model("core-1-mini-embedding-query")
    assert old.deprecated and old.deprecation_date.isoformat() == "2024-06-15"
    assert serving_card(old).name == "core-embedding-1-large-query"
    assert serving_card(find_model("core-1-mini-embedding-passage")).name == (
        "core-embedding-1-large-passage"
    )


def test_unknown_model_is_404_naming_the_available_models():
    with pytest.raises(NotFoundError) as caught:
        find_model("gpt-4")
    assert caught.value.status_code == 404
    assert "gpt-4" in caught.value.message and "core-1-mini-chat" in caught.value.message


def test_model_used_for_the_wrong_operation_names_the_models_that_work():
    with pytest.raises(BadRequestError) as caught:
        resolve_model("core-embedding-1-large-query", Operation.CHAT, Operation.GROUNDEDNESS)
    message = caught.value.message
    assert "core-1-mini-chat" in message and "core-1-mini-groundedness-check" in message
    with pytest.raises(BadRequestError) as caught:
        resolve_model("core-1-mini-chat", Operation.EMBEDDINGS)
    assert "core-embedding-1-large-passage" in caught.value.message
    assert "core-1-mini-embedding-query" not in caught.value.message  # deprecated: not advised


def test_model_list_has_openai_shape():
    listing = model_list().model_dump()
    assert listing["object"] == "list"
    assert {m["id"] for m in listing["data"]} == {c.name for c in CATALOGUE}
    chat = next(m for m in listing["data"] if m["id"] == "core-1-mini-chat")
    assert chat["object"] == "model" and chat["version"] == "core-1-mini-chat-240502"


def test_model_created_is_midnight_utc_whatever_the_server_zone(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Seoul")
    time.tzset()
    try:
        chat = next(m for m in model_list().data if m.id == "core-1-mini-chat")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert chat.created == 1714608000  # 2024-05-02T00:00:00Z


def test_embedding_model_names_the_query_and_passage_models_of_a_family():
    assert embedding_model(InputType.QUERY) == "core-embedding-1-large-query"
    assert embedding_model(InputType.PASSAGE, "core-1-mini-embedding") == (
        "core-1-mini-embedding-passage"
    )
    for card in CATALOGUE:
        if card.input_type is not None:
            family = card.name.removesuffix(f"-{card.input_type.value}")
            assert embedding_model(card.input_type, family) == card.name
    with pytest.raises(ValueError, match="without '-query' or '-passage'"):
        embedding_model(InputType.QUERY, "core-embedding-1-large-query")
