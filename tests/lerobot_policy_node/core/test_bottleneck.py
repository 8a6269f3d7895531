"""What the policy node advises when inferences cannot keep the chunk fed: the link to a policy server or the
inference. Measured case behind it: a raw 320x240 image (236 kB a request) over a 5 Mbit/s link spends 0.38 s on
the wire per chunk; more inference workers then share that link and make every request slower, so the advice
must be about bytes per observation, not workers."""

from __future__ import annotations

import threading

import pytest

from lerobot_policy_node.core.bottleneck import Bottleneck, LinkFigures, LinkMonitor, advise

RAW_OVER_5_MBIT = LinkFigures(calls=20, request_bytes=236_000, transfer_s=0.38, server_inference_s=0.03, encode_s=0)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_link_bound_server_gets_image_encoding_advice_never_more_workers(workers: int) -> None:
    advice = advise(0.9, 1.0, workers, RAW_OVER_5_MBIT, image_encoding="raw", has_images=True)
    assert advice.bottleneck is Bottleneck.LINK
    assert "the link carries 4.97 Mbit/s per request at 236 kB/observation" in advice.message
    assert "set image_encoding:=jpeg" in advice.message
    assert "raise inference_workers" not in advice.message


@pytest.mark.parametrize(
    ("encoding", "fix"),
    [("png", "set image_encoding:=jpeg (PNG is lossless"), ("jpeg", "lower jpeg_quality (now 90)")],
)
def test_the_link_advice_follows_the_encoding_in_use(encoding: str, fix: str) -> None:
    advice = advise(0.9, 1.0, 1, RAW_OVER_5_MBIT, image_encoding=encoding, jpeg_quality=90, has_images=True)
    assert fix in advice.message


def test_a_slow_model_behind_a_fast_link_gets_the_inference_advice() -> None:
    link = LinkFigures(calls=5, request_bytes=12_000, transfer_s=0.02, server_inference_s=0.78, encode_s=0.001)
    advice = advise(0.8, 1.0, 1, link, image_encoding="jpeg", has_images=True)
    assert advice.bottleneck is Bottleneck.INFERENCE
    assert advice.message.startswith("inference takes 80 % of the chunk period")
    assert "raise inference_workers" in advice.message and "the server's own inference: 0.780 s" in advice.message


def test_a_local_policy_that_keeps_up_has_no_advice_and_one_that_does_not_gets_workers() -> None:
    assert advise(0.4, 1.0, 1).bottleneck is Bottleneck.NONE  # 1 worker keeps up to half the chunk
    assert advise(0.6, 1.0, 2).bottleneck is Bottleneck.NONE  # 2 workers up to two thirds
    assert "raise inference_workers" in advise(0.6, 1.0, 1).message


def test_the_monitor_averages_the_last_calls_from_several_workers() -> None:
    monitor = LinkMonitor(window=4)
    assert monitor.figures() is None
    threads = [threading.Thread(target=monitor.record, args=(1000, 0.5, 0.1, 0.01)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    figures = monitor.figures()
    assert figures is not None and figures.calls == 4
    assert figures.transfer_s == pytest.approx(0.4) and figures.mbit_s == pytest.approx(0.02)
    monitor.record(1000, 0.05, 0.1, 0)  # a server time above the round trip (clock granularity): no negative time
    assert monitor.figures().transfer_s >= 0
