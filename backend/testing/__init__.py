"""Test doubles shipped with the library, for this project's tests and for users' own:
engines that run no model (``engines``), backends that record or script their answers
(``backends``), and servers on loopback in a thread or a child process (``servers``, which
needs the ``server`` extra and is imported on its own).

>>> from backend.testing import RecordingBackend, scripted_backend
>>> service = RecordingBackend(scripted_backend("It is sunny."))
"""

from backend.testing.backends import (
    GatedWarmupBackend,
    RecordingBackend,
    StubBackend,
    offline_backend,
    scripted_backend,
)
from backend.testing.engines import (
    EOS,
    CharCountEmbeddingEngine,
    CharTokenizer,
    EchoChatEngine,
    ScriptedChatEngine,
    TermOverlapJudgeEngine,
    ToolLoopEngine,
)

__all__ = [
    "EOS",
    "CharCountEmbeddingEngine",
    "CharTokenizer",
    "EchoChatEngine",
    "GatedWarmupBackend",
    "RecordingBackend",
    "ScriptedChatEngine",
    "StubBackend",
    "TermOverlapJudgeEngine",
    "ToolLoopEngine",
    "offline_backend",
    "scripted_backend",
]
