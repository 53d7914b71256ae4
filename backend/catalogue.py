"""The model catalogue of spec section 2.1: names, aliases, operations, statuses.

Aliases (``core-1-mini-chat``) resolve to versioned names (``core-1-mini-chat-240502``), which
every response reports; versioned names are accepted as input too. The deprecated embedding
models are served by their replacements, with a deprecation warning.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from backend.errors import BadRequestError, NotFoundError


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


CATALOGUE: tuple[ModelCard, ...] = (
    ModelCard(
        name="core-1-mini-chat",
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
        name="core-1-mini-groundedness-check",
        version="core-1-mini-groundedness-check-240502",
        operation=Operation.GROUNDEDNESS,
        status="beta",
        release_date=dt.date(2024, 5, 2),
        context_length=32768,
        description="The only model accepted for the groundedness check.",
    ),
    ModelCard(
        name="core-embedding-1-large-query",
        version="core-embedding-1-large-query",
        operation=Operation.EMBEDDINGS,
        status="beta",
        release_date=dt.date(2024, 5, 10),
        context_length=4000,
        description="For embedding user questions (retrieval, reranking).",
        input_type=InputType.QUERY,
    ),
    ModelCard(
        name="core-embedding-1-large-passage",
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
