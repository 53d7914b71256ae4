"""An engine's thread and native resources, released exactly once: on ``close()``, when the
engine is garbage-collected unclosed, or at interpreter exit, whichever comes first.

A runner thread is a daemon, so a script that never calls ``close()`` does not hang at exit;
but a daemon still inside a forward pass (a stream left unread mid-generation) when the
interpreter tears down torch's or llama.cpp's native state crashes the process: SIGABRT with
"terminate called without an active exception" on transformers, SIGSEGV on llama.cpp. A
``weakref.finalize`` runs before that teardown (at ``atexit``), stops the thread after its
current step and only then frees what it used.
"""

from __future__ import annotations

import weakref
from typing import Protocol


class Closeable(Protocol):
    def close(self) -> None: ...


def release_once(owner: object, *parts: Closeable) -> weakref.finalize:
    """Close ``parts`` in order (the runner first, then what its thread used) when ``owner``
    is closed (call the result), collected, or at interpreter exit, once. ``parts`` must not
    refer back to ``owner``, or it would never be collected."""
    return weakref.finalize(owner, _close_in_order, parts)


def _close_in_order(parts: tuple[Closeable, ...]) -> None:
    for part in parts:
        part.close()
