"""A throttle on failed authentication, per client address (in the memory of one API process).

After ``limit`` failed attempts (unknown bearer token, wrong organiser sign-in) from one address
within ``window_seconds``, every authentication attempt from that address is answered 429 with
a ``Retry-After`` until the oldest failure leaves the window, correct tokens included, so that
guessing gains nothing by going on. Successful requests are never counted. With several API
processes each keeps its own count, so the limit applies per process.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque


class FailedAuthThrottle:
    """Sliding-window count of failed authentications per address.

    Args:
        limit: failures allowed per window before the address is throttled.
        window_seconds: length of the window.
        max_addresses: addresses remembered (the oldest forgotten first), bounding memory.
    """

    def __init__(self, *, limit: int, window_seconds: float, max_addresses: int = 100_000) -> None:
        self.limit = limit
        self.window = window_seconds
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None when it is not throttled."""
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return None
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) < self.limit:
                return None
            return max(1, math.ceil(failures[0] + self.window - now))

    def record_failure(self, address: str) -> None:
        """Count one failed authentication of ``address``."""
        with self._lock:
            failures = self._failures.pop(address, None) or deque()
            failures.append(time.monotonic())
            while len(failures) > self.limit:
                failures.popleft()
            self._failures[address] = failures
            while len(self._failures) > self.max_addresses:
                self._failures.pop(next(iter(self._failures)))
