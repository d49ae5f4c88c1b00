"""A one-line progress printer for the transfer commands: it redraws on a terminal and
stays silent otherwise, so logs and pipes get only the final report."""

import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO, total: int, verb: str) -> None:
        self.stream = stream
        self.total = total
        self.verb = verb
        self.enabled = hasattr(stream, "isatty") and stream.isatty()
        self._last = 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.2 and done != self.total):
            return
        self._last = now
        width = 30
        filled = width * done // self.total if self.total else width
        self.stream.write(f"\r{self.verb} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
