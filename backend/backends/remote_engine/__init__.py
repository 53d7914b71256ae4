"""The service in front of OpenAI-compatible engines (vLLM, Ray Serve LLM, llama-server, TEI,
Ollama): ``backend.connect(engine_url=..., chat_model=..., embeddings_url=...)``."""

from backend.backends.remote_engine.backend import EngineBackend
from backend.backends.remote_engine.settings import EngineSettings, engine_api_url

__all__ = ["EngineBackend", "EngineSettings", "engine_api_url"]
