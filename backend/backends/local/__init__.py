"""The service in this process: ``InProcessBackend`` loads the configured engines
(``EngineConfig``) and dispatches each request to the chat, groundedness or embeddings room;
``shared_backend`` hands the adapters reference-counted handles on one backend per setting."""

from backend.backends.local.backend import InProcessBackend
from backend.backends.local.config import EngineConfig

__all__ = ["EngineConfig", "InProcessBackend"]
