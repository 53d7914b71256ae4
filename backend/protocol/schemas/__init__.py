"""The service's wire format (spec sections 2.1-2.8 and the request bodies of 4.1-4.3), one
module per part: the bases and the error object (``base``), tool calls and definitions
(``tools``), the chat request (``chat_request``) and what it answers (``chat_response``),
embeddings (``embeddings``) and the model list (``model_list``).

Every name is imported here, so ``from backend.protocol.schemas import ChatCompletionRequest``
reads the same whichever module holds it.
"""

from backend.protocol.schemas.base import ErrorBody, ErrorResponse
from backend.protocol.schemas.chat_request import (
    MAX_TOP_LOGPROBS,
    ChatCompletionRequest,
    ChatMessage,
    JSONSchemaFormat,
    ResponseFormat,
    Role,
    StreamOptions,
    TextContentPart,
)
from backend.protocol.schemas.chat_response import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChoiceLogprobs,
    ChunkChoice,
    Delta,
    FinishReason,
    FunctionCallDelta,
    TokenLogprob,
    ToolCallDelta,
    TopLogprob,
    Usage,
    Verdict,
    new_completion_id,
    new_tool_call_id,
    now,
)
from backend.protocol.schemas.embeddings import (
    Embedding,
    EmbeddingList,
    EmbeddingRequest,
    EmbeddingUsage,
)
from backend.protocol.schemas.model_list import ModelList, ModelObject
from backend.protocol.schemas.tools import (
    FunctionCall,
    FunctionDefinition,
    ToolCall,
    ToolChoice,
    ToolChoiceFunction,
    ToolChoiceObject,
    ToolDefinition,
)

__all__ = [
    "MAX_TOP_LOGPROBS",
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatMessage",
    "Choice",
    "ChoiceLogprobs",
    "ChunkChoice",
    "Delta",
    "Embedding",
    "EmbeddingList",
    "EmbeddingRequest",
    "EmbeddingUsage",
    "ErrorBody",
    "ErrorResponse",
    "FinishReason",
    "FunctionCall",
    "FunctionCallDelta",
    "FunctionDefinition",
    "JSONSchemaFormat",
    "ModelList",
    "ModelObject",
    "ResponseFormat",
    "Role",
    "StreamOptions",
    "TextContentPart",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolChoiceFunction",
    "ToolChoiceObject",
    "ToolDefinition",
    "TopLogprob",
    "Usage",
    "Verdict",
    "new_completion_id",
    "new_tool_call_id",
    "now",
]
