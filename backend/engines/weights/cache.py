"""The folder where converted model weights live, and the once-only conversion into it.

Converting the embedded weights (dequantising GGUF or 4-bit files into a transformers folder)
takes tens of seconds; it happens once per cache folder. A file lock makes sure two processes
(say the server and a test run) never convert at the same time, and the result appears under
its final name only when complete, so an interrupted conversion is simply redone.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "CORE_CACHE_DIR"
_COMPLETE_MARKER = ".complete"


def cache_root() -> Path:
    """``$CORE_CACHE_DIR`` when set, else the user cache dir (``~/.cache/core-textmodels``)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("core-textmodels", appauthor=False))


def ensure_converted(name: str, build: Callable[[Path], None]) -> Path:
    """Return ``cache_root()/name``, running ``build(tmp_folder)`` first if it is missing.

    ``build`` writes the converted files into the empty folder it is given; that folder is
    renamed to its final place only after ``build`` returned, under a lock shared by every
    process using the same cache.
    """
    root = cache_root()
    target = root / name
    if (target / _COMPLETE_MARKER).exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{name}.lock")):
        if (target / _COMPLETE_MARKER).exists():  # another process finished while we waited
            return target
        logger.info("converting %s into %s (once per cache folder)", name, target)
        staging = Path(tempfile.mkdtemp(prefix=f"{name}.partial-", dir=root))
        try:
            build(staging)
            (staging / _COMPLETE_MARKER).write_text("ok\n")
            if target.exists():  # a stale, incomplete earlier attempt
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return target
