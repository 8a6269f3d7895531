"""What keeps the policy node from feeding the executor: the link to a policy server, or the inference itself.

`LinkMonitor` keeps the figures of the last Predict calls to a policy server: bytes sent per request, the time on
the wire (round trip minus the server's own inference time) and the time compressing images. `advise` compares
the expected inference time (what the scheduler plans with) with what the chunk allows and says what to change,
in one line: more inference workers only help when the model is the bottleneck; when the wire takes most of the
time, concurrent requests share the same link and each one gets slower, so the advice is to send fewer bytes.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from enum import Enum

RAW, JPEG, PNG = "raw", "jpeg", "png"


@dataclass(frozen=True)
class LinkFigures:
    """Means over the last calls: request size (bytes), time on the wire, the server's inference, encoding (s)."""

    calls: int
    request_bytes: float
    transfer_s: float
    server_inference_s: float
    encode_s: float

    @property
    def mbit_s(self) -> float:
        """What the link carried per request while it was sent (Mbit/s)."""
        return self.request_bytes * 8 / max(self.transfer_s, 1e-6) / 1e6


class LinkMonitor:
    """The last `window` Predict calls' figures (thread-safe: the inference workers record concurrently)."""

    def __init__(self, window: int = 20) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self._calls: deque[tuple[int, float, float, float]] = deque(maxlen=window)
        self._lock = threading.Lock()

    def record(self, request_bytes: int, round_trip_s: float, server_inference_s: float, encode_s: float) -> None:
        transfer = max(0.0, round_trip_s - server_inference_s)
        with self._lock:
            self._calls.append((request_bytes, transfer, server_inference_s, encode_s))

    def figures(self) -> LinkFigures | None:
        """Means of the recorded calls; None before the first."""
        with self._lock:
            calls = list(self._calls)
        if not calls:
            return None
        n = len(calls)
        sums = [sum(call[i] for call in calls) for i in range(4)]
        return LinkFigures(n, sums[0] / n, sums[1] / n, sums[2] / n, sums[3] / n)


class Bottleneck(str, Enum):
    NONE = "none"
    LINK = "link"
    INFERENCE = "inference"


@dataclass(frozen=True)
class Advice:
    """What limits the node and what to change (`message` is empty when nothing does)."""

    bottleneck: Bottleneck
    message: str = ""


def _link_fix(image_encoding: str, jpeg_quality: int, has_images: bool) -> str:
    if has_images and image_encoding == RAW:
        return "set image_encoding:=jpeg"
    if has_images and image_encoding == PNG:
        return "set image_encoding:=jpeg (PNG is lossless, so camera noise keeps it large)"
    if has_images and image_encoding == JPEG:
        return f"lower jpeg_quality (now {jpeg_quality}), send smaller camera images or use a faster link"
    return "use a faster link or a policy with a longer chunk"


def advise(
    expected_s: float,
    chunk_s: float,
    workers: int,
    link: LinkFigures | None = None,
    *,
    image_encoding: str = RAW,
    jpeg_quality: int = 90,
    has_images: bool = False,
) -> Advice:
    """The bottleneck when an inference (`expected_s`, with the scheduler's margin) is too long for `workers`
    overlapping inferences to keep a `chunk_s` chunk fed (longer than chunk_s * workers / (workers + 1)).

    With `link` figures (a policy server), the link is the bottleneck when the time on the wire is the larger
    part of a call; then more workers would only share it, and the advice is about bytes per observation.
    """
    if chunk_s <= 0 or expected_s <= chunk_s * workers / (workers + 1):
        return Advice(Bottleneck.NONE)
    if link is not None and link.transfer_s >= max(link.server_inference_s, link.encode_s):
        more = " (more inference_workers would only share the same link)"
        return Advice(
            Bottleneck.LINK,
            f"the link carries {link.mbit_s:.2f} Mbit/s per request at {link.request_bytes / 1000:.0f} kB/observation "
            f"({link.transfer_s:.3f} s on the wire of the {expected_s:.3f} s an inference takes with the margin; the "
            f"chunk lasts {chunk_s:.3f} s): {_link_fix(image_encoding, jpeg_quality, has_images)}{more}",
        )
    where = f"; the server's own inference: {link.server_inference_s:.3f} s" if link is not None else ""
    return Advice(
        Bottleneck.INFERENCE,
        f"inference takes {100 * expected_s / chunk_s:.0f} % of the chunk period ({expected_s:.3f} s with the margin "
        f"of a {chunk_s:.3f} s chunk{where}; {workers} worker(s) keep it fed up to "
        f"{100 * workers / (workers + 1):.0f} %): the executor will starve; raise inference_workers (if the device "
        "has the throughput), use a faster device or train a longer chunk",
    )
