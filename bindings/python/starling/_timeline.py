"""User activities on a Chrome-trace timeline (chrome://tracing, Perfetto).

Enabled by STARLING_TIMELINE=<prefix> (or BlueFog's BLUEFOG_TIMELINE): each rank
writes <prefix><rank>.json, a valid JSON array closed at shutdown. Each tensor name is
shown as a process and each Python thread as a thread, as BlueFog's timeline did; time
stamps are microseconds since the timeline was opened. Starling's C core has no
timeline of its own yet, so only activities recorded through this module appear.
"""

import json
import os
import threading
import time
from typing import IO, Dict, Optional


def timeline_prefix() -> Optional[str]:
    """The configured prefix, or None when the timeline is off."""
    for name in ("STARLING_TIMELINE", "BLUEFOG_TIMELINE"):
        value = os.environ.get(name)
        if value:
            return value
    return None


class Timeline:
    """One rank's timeline file. Thread-safe; records are written as they come."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._file: Optional[IO[str]] = open(path, "w", encoding="utf-8")
        self._file.write("[")
        self._first = True
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self._pids: Dict[str, int] = {}
        self._tids: Dict[int, int] = {}

    def _write(self, record: Dict[str, object]) -> None:
        assert self._file is not None
        self._file.write(("\n" if self._first else ",\n") + json.dumps(record))
        self._first = False

    def _ids(self, tensor_name: str) -> tuple:
        tid = self._tids.setdefault(threading.get_ident(), len(self._tids) + 1)
        pid = self._pids.get(tensor_name)
        if pid is None:
            pid = self._pids[tensor_name] = len(self._pids) + 1
            self._write({"name": "process_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tensor_name}})
            self._write({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"sort_index": pid}})
        return pid, tid

    def _now(self) -> float:
        return round((time.perf_counter() - self._start) * 1e6, 3)

    def start(self, tensor_name: str, activity_name: str) -> bool:
        with self._lock:
            if self._file is None:
                return False
            pid, tid = self._ids(tensor_name)
            self._write({"ph": "B", "name": activity_name, "ts": self._now(), "pid": pid, "tid": tid})
            return True

    def end(self, tensor_name: str) -> bool:
        with self._lock:
            if self._file is None:
                return False
            pid, tid = self._ids(tensor_name)
            self._write({"ph": "E", "ts": self._now(), "pid": pid, "tid": tid})
            return True

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.write("\n]\n")
                self._file.close()
                self._file = None
