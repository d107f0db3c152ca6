"""The "starling" logger. Silent unless asked: STARLING_LOG_LEVEL (or BlueFog's
BLUEFOG_LOG_LEVEL) adds a stderr handler at that level, with a [rank N] prefix, for the
Python layer's messages (the C core logs through the same variables)."""

import logging
import os

logger = logging.getLogger("starling")
logger.addHandler(logging.NullHandler())

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR, "fatal": logging.CRITICAL}
_handler = None


def configure(rank: int) -> None:
    """Applies the log level from the environment once the rank is known."""
    global _handler
    value = (os.environ.get("STARLING_LOG_LEVEL") or os.environ.get("BLUEFOG_LOG_LEVEL") or "").lower()
    level = _LEVELS.get(value)
    if level is None:
        return
    if _handler is None:
        _handler = logging.StreamHandler()
        logger.addHandler(_handler)
    _handler.setFormatter(logging.Formatter(f"[rank {rank}] starling %(levelname)s: %(message)s"))
    logger.setLevel(level)
