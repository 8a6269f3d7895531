"""Server and client in one process: calls, typed failures (bad input, failing policy, no server, version)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_policy_server import SinePolicy

from lerobot_policy_server import protocol
from lerobot_policy_server.client import PolicyClient, RemoteError, parse_address
from lerobot_policy_server.protocol import ErrorCode
from lerobot_policy_server.service import start_server


@pytest.fixture
def served():
    started = []

    def serve(fault: str = "none"):
        policy = SinePolicy(6, 15, 30.0, fault)
        server, port = start_server(policy, "127.0.0.1", 0)
        client = PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=5.0)
        started.append((server, client))
        return policy, client

    yield serve
    for server, client in started:
        client.close()
        server.stop(0)


def test_info_predict_reset(served) -> None:
    policy, client = served()
    info = client.info()
    assert info == dataclasses.replace(policy.info, image_encodings=("raw", "jpeg", "png"))
    state = np.arange(6, dtype=np.float32)
    reply = client.predict({"observation.state": state}, stamp_ns=123, task="stack the cubes")
    assert reply.stamp_ns == 123 and reply.task == "stack the cubes"
    assert reply.actions.shape == (15, 6) and reply.inference_time_s >= 0
    np.testing.assert_array_equal(reply.actions, policy.predict({"observation.state": state}, ""))
    client.reset()
    assert policy.calls == 0


def test_wrong_observation_is_invalid_argument_naming_the_feature(served) -> None:
    _, client = served()
    needs = r"'observation\.state': got float32 \(5,\), the policy needs float32 \(6,\)"
    with pytest.raises(RemoteError, match=needs) as err:
        client.predict({"observation.state": np.zeros(5, np.float32)}, 0)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(RemoteError, match=r"lacks 'observation\.state'"):
        client.predict({}, 0)


def test_a_failing_policy_is_internal_and_the_server_keeps_serving(served) -> None:
    _, client = served("fail")
    for _ in range(2):
        with pytest.raises(RemoteError, match="inference failed: RuntimeError: the fake policy fails") as err:
            client.predict({"observation.state": np.zeros(6, np.float32)}, 0)
        assert err.value.code is ErrorCode.INTERNAL
    assert client.info().policy_type == "fake_sine"


def test_no_server_is_unavailable_with_the_address() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=2.0) as client,
        pytest.raises(RemoteError, match=f"policy server grpc://127.0.0.1:{port} unreachable") as err,
    ):
        client.info()
    assert err.value.code is ErrorCode.UNAVAILABLE


def test_a_client_of_another_protocol_version_gets_failed_precondition(served) -> None:
    _, client = served()
    frame = bytearray(protocol.encode_info_request())
    frame[4:6] = (99).to_bytes(2, "little")  # the version field of the prefix
    with pytest.raises(RemoteError, match="peer speaks protocol version 99, this side 1") as err:
        client._call("Info", bytes(frame), None)
    assert err.value.code is ErrorCode.FAILED_PRECONDITION


@pytest.mark.parametrize(
    ("url", "expected"), [("grpc://gpu-host:50051", ("gpu-host", 50051)), ("grpc://[::1]:7/", ("::1", 7))]
)
def test_parse_address(url: str, expected: tuple[str, int]) -> None:
    assert parse_address(url) == expected


@pytest.mark.parametrize("url", ["http://h:1", "grpc://h", "grpc://:1", "grpc://h:0", "grpc://h:x"])
def test_bad_addresses_name_the_expected_form(url: str) -> None:
    with pytest.raises(ValueError, match="grpc://HOST:PORT"):
        parse_address(url)
