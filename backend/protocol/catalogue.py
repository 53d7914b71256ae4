"""The model catalogue of spec section 2.1: names, aliases, operations, statuses.

Aliases (``core-1-mini-chat``) resolve to versioned names (``core-1-mini-chat-240502``), which
every response reports; versioned names are accepted as input too. The deprecated embedding
models are served by their replacements, with a deprecation warning.

Every model name used outside this module comes from here: the defaults below, and
``embedding_model``, the one rule that names the query or passage model of a family.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from backend.protocol.errors import BadRequestError, NotFoundError
from backend.protocol.schemas import ModelList, ModelObject


class Operation(str, enum.Enum):
    CHAT = "chat"
    GROUNDEDNESS = "groundedness"
    EMBEDDINGS = "embeddings"


class InputType(str, enum.Enum):
    """Which side of the shared embedding space a model embeds."""

    QUERY = "query"
    PASSAGE = "passage"


@dataclass(frozen=True)
class ModelCard:
    """One catalogue entry."""

    name: str
    version: str
    operation: Operation
    status: str
    release_date: dt.date
    context_length: int
    description: str
    input_type: InputType | None = None
    deprecation_date: dt.date | None = None
    replaced_by: str | None = None

    @property
    def deprecated(self) -> bool:
        return self.status == "deprecated"


#: The chat model clients use unless told otherwise.
DEFAULT_CHAT_MODEL = "core-1-mini-chat"
#: The only model of the groundedness check (spec 4.2).
GROUNDEDNESS_MODEL = "core-1-mini-groundedness-check"
#: The embedding family whose ``-query`` and ``-passage`` models share one vector space.
DEFAULT_EMBEDDING_FAMILY = "core-embedding-1-large"


def embedding_model(input_type: InputType, family: str = DEFAULT_EMBEDDING_FAMILY) -> str:
    """The name of a family's query or passage model: ``<family>-query`` / ``<family>-passage``.

    Raises:
        ValueError: ``family`` already names one of the two models.
    """
    if family.endswith(tuple(f"-{kind.value}" for kind in InputType)):
        raise ValueError(
            f"the embedding model family is named without '-query' or '-passage' (got "
            f"{family!r}, use {family.rsplit('-', 1)[0]!r}); both models are used"
        )
    return f"{family}-{InputType(input_type).value}"


QUERY_MODEL = embedding_model(InputType.QUERY)
PASSAGE_MODEL = embedding_model(InputType.PASSAGE)

CATALOGUE: tuple[ModelCard, ...] = (
    ModelCard(
        name=DEFAULT_CHAT_MODEL,
        version="core-1-mini-chat-240502",
        operation=Operation.CHAT,
        status="beta",
        release_date=dt.date(2024, 5, 2),
        context_length=32768,
        description="Compact chat model, English and Korean.",
    ),
    ModelCard(
        name="core-1-mini-chat-ja",
        version="core-1-mini-chat-ja-240510",
        operation=Operation.CHAT,
        status="beta",
        release_date=dt.date(2024, 5, 16),
        context_length=32768,
        description="Extends core-1-mini-chat with Japanese.",
    ),
    ModelCard(
        name=GROUNDEDNESS_MODEL,
        version="core-1-mini-groundedness-check-240502",
        operation=Operation.GROUNDEDNESS,
        status="beta",
        release_date=dt.date(2024, 5, 2),
        context_length=32768,
        description="The only model accepted for the groundedness check.",
    ),
    ModelCard(
        name=QUERY_MODEL,
        version="core-embedding-1-large-query",
        operation=Operation.EMBEDDINGS,
        status="beta",
        release_date=dt.date(2024, 5, 10),
        context_length=4000,
        description="For embedding user questions (retrieval, reranking).",
        input_type=InputType.QUERY,
    ),
    ModelCard(
        name=PASSAGE_MODEL,
        version="core-embedding-1-large-passage",
        operation=Operation.EMBEDDINGS,
        status="beta",
        release_date=dt.date(2024, 5, 10),
        context_length=4000,
        description="For embedding documents or texts to be searched.",
        input_type=InputType.PASSAGE,
    ),
    ModelCard(
        name="core-1-mini-embedding-query",
        version="core-1-mini-embedding-query",
        operation=Operation.EMBEDDINGS,
        status="deprecated",
        release_date=dt.date(2024, 3, 12),
        context_length=4000,
        description="Previous query model; deprecated on 2024-06-15.",
        input_type=InputType.QUERY,
        deprecation_date=dt.date(2024, 6, 15),
        replaced_by="core-embedding-1-large-query",
    ),
    ModelCard(
        name="core-1-mini-embedding-passage",
        version="core-1-mini-embedding-passage",
        operation=Operation.EMBEDDINGS,
        status="deprecated",
        release_date=dt.date(2024, 3, 12),
        context_length=4000,
        description="Previous passage model; deprecated on 2024-06-15.",
        input_type=InputType.PASSAGE,
        deprecation_date=dt.date(2024, 6, 15),
        replaced_by="core-embedding-1-large-passage",
    ),
)

_BY_NAME: dict[str, ModelCard] = {}
for _card in CATALOGUE:
    _BY_NAME[_card.name] = _card
    _BY_NAME[_card.version] = _card


def names_for(*operations: Operation) -> list[str]:
    """The current (non-deprecated) model names serving any of these operations."""
    return [c.name for c in CATALOGUE if c.operation in operations and not c.deprecated]


def find_model(name: str) -> ModelCard:
    """The catalogue entry for a name or versioned name.

    Raises:
        NotFoundError: the name is not in the catalogue (status 404, the usable names listed).
    """
    card = _BY_NAME.get(name)
    if card is None:
        known = ", ".join(c.name for c in CATALOGUE if not c.deprecated)
        raise NotFoundError(
            f"invalid request: model '{name}' does not exist; available models: {known}",
            param="model",
            code="model_not_found",
        )
    return card


def resolve_model(name: str, *operations: Operation) -> ModelCard:
    """The entry for ``name``, checked to serve one of ``operations``.

    Raises:
        NotFoundError: unknown name.
        BadRequestError: the model exists but serves another operation; the message names
            the models that would work.
    """
    card = find_model(name)
    if card.operation not in operations:
        wanted = " or ".join(op.value for op in operations)
        usable = ", ".join(names_for(*operations))
        raise BadRequestError(
            f"invalid request: model '{name}' is a {card.operation.value} model and cannot be "
            f"used for {wanted}; use one of: {usable}",
            param="model",
        )
    return card


def serving_card(card: ModelCard) -> ModelCard:
    """The entry that actually serves a request: a deprecated model's replacement."""
    return _BY_NAME[card.replaced_by] if card.replaced_by else card


def _release_timestamp(day: dt.date) -> int:
    """Midnight UTC of ``day`` in Unix seconds: the same on every server, whatever its zone."""
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp())


def model_list() -> ModelList:
    """The catalogue in OpenAI's list shape (``GET /v1/core/models``)."""
    return ModelList(
        data=[
            ModelObject(
                id=card.name,
                created=_release_timestamp(card.release_date),
                operation=card.operation.value,
                status=card.status,  # type: ignore[arg-type]
                release_date=card.release_date.isoformat(),
                context_length=card.context_length,
                version=card.version,
                deprecation_date=card.deprecation_date.isoformat()
                if card.deprecation_date
                else None,
                replaced_by=card.replaced_by,
            )
            for card in CATALOGUE
        ]
    )
