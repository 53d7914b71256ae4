"""The HTTP API server: a FastAPI app over any ``Backend`` (needs the ``server`` extra).

``create_app(backend, settings)`` builds the app; ``runner.run_server`` serves the in-process
backend with uvicorn (``core-textmodels serve``), and ``ray_serve`` serves replicas of the
same app on Ray Serve (``core-textmodels serve --ray``; needs the ``ray`` extra).
"""

from backend.server.app import create_app
from backend.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
