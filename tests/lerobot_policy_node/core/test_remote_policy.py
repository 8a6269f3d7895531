"""`RemotePolicy` (checkpoint:=grpc://HOST:PORT) against an in-process policy server, and the one-line error
that sends a policy type this node cannot run in-process to the server route."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lerobot_policy_node.core.errors import PolicyLoadError, RemotePolicyError
from lerobot_policy_node.core.policies import CheckpointPolicy, RemotePolicy
from lerobot_policy_server.service import start_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "policy_server"))
from fake_policy_server import SinePolicy
from reference import free_port


class TaskRecorder(SinePolicy):
    resets = 0

    def reset(self):
        self.resets += 1
        super().reset()

    def predict(self, observation, task):
        self.tasks.append(task)
        return super().predict(observation, task)


@pytest.fixture
def port():
    return free_port()


def serve(port: int, policy=None):
    policy = policy or TaskRecorder(6, 15, 30.0, "none")
    server, bound = start_server(policy, "127.0.0.1", port)
    assert bound == port
    return server, policy


def test_remote_policy_takes_its_shape_from_the_server_and_sends_stamp_and_task(port) -> None:
    server, served = serve(port)
    try:
        policy = RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=5.0)
        assert served.resets == 1  # configuring starts a new episode on the server
        assert [(f.key, f.shape, f.visual) for f in policy.inputs] == [("observation.state", (6,), False)]
        assert (policy.action_dim, policy.horizon, policy.fps, policy.action_names) == (6, 15, 30.0, None)
        state = np.linspace(-1, 1, 6)  # float64 from the assembler: sent as the float32 the server declares
        chunk = policy.predict_chunk({"observation.state": state, "timestamp": 12.5, "task": "wave"})
        assert chunk.dtype == np.float64 and chunk.shape == (15, 6)
        np.testing.assert_allclose(chunk[:, 1:], np.repeat(state[None, 1:], 15, axis=0), atol=1e-6)
        assert served.tasks == ["wave"] and policy.last_task == "wave"
        policy.close()
    finally:
        server.stop(0)


def test_a_server_going_away_is_retried_with_backoff_and_found_again(port) -> None:
    server, _ = serve(port)
    policy = RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=2.0)
    observation = {"observation.state": np.zeros(6), "timestamp": 1.0, "task": ""}
    policy.predict_chunk(observation)
    server.stop(0).wait()
    with pytest.raises(RemotePolicyError, match=rf"policy server grpc://127.0.0.1:{port} unreachable.*failure 1"):
        policy.predict_chunk(observation)
    with pytest.raises(RemotePolicyError, match="next attempt in"):  # within the backoff: no call at all
        policy.predict_chunk(observation)
    server, _ = serve(port)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert policy.predict_chunk(observation).shape == (15, 6)
                break
            except RemotePolicyError:
                assert time.monotonic() < deadline, "never reconnected"
                time.sleep(0.05)
    finally:
        server.stop(0)
        policy.close()


def test_a_server_serving_another_policy_after_a_restart_is_refused(port) -> None:
    server, _ = serve(port)
    policy = RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=2.0)
    observation = {"observation.state": np.zeros(6), "timestamp": 1.0}
    server.stop(0).wait()
    with pytest.raises(RemotePolicyError, match="unreachable"):
        policy.predict_chunk(observation)
    server, _ = serve(port, TaskRecorder(7, 15, 30.0, "none"))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                policy.predict_chunk(observation)
            except RemotePolicyError as err:
                if "now serves a different policy" in str(err):
                    break
                assert time.monotonic() < deadline, f"never saw the other policy: {err}"
                time.sleep(0.05)
    finally:
        server.stop(0)
        policy.close()


def test_unreachable_at_configure_names_the_server_route(port) -> None:
    with pytest.raises(PolicyLoadError, match=r"unreachable.*lerobot-ros policy-server CHECKPOINT --port PORT"):
        RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=1.0, connect_timeout_s=1.0)


def test_a_type_only_lerobot_runs_names_the_server_route(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"type": "pi05"}))
    with pytest.raises(PolicyLoadError) as err:
        CheckpointPolicy(tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("policy type 'pi05' of ")
    assert "does not run in-process (this node runs act, diffusion)" in message
    assert f"lerobot-ros policy-server {tmp_path} --port 50051" in message
    assert "checkpoint:=grpc://HOST:50051" in message


@pytest.mark.parametrize("encoding", ["raw", "jpeg", "png"])
def test_camera_images_go_as_the_chosen_encoding_and_the_link_is_measured(port, encoding: str) -> None:
    from fake_policy_server import camera_like_image

    server, _ = serve(port, TaskRecorder(6, 15, 30.0, "none", camera=(240, 320)))
    try:
        policy = RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=5.0, image_encoding=encoding, jpeg_quality=90)
        image = camera_like_image(240, 320)
        for i in range(3):
            observation = {"observation.state": np.zeros(6), "observation.images.front": image, "timestamp": i}
            policy.predict_chunk(observation)
        figures = policy.link.figures()
        policy.close()
    finally:
        server.stop(0)
    assert figures is not None and figures.calls == 3
    raw = 240 * 320 * 3
    expected = {"raw": (raw, raw + 2000), "jpeg": (1000, raw / 10), "png": (1000, raw)}[encoding]
    assert expected[0] < figures.request_bytes < expected[1]
    assert figures.transfer_s > 0 and figures.server_inference_s >= 0


def test_an_encoding_the_server_cannot_decode_is_refused_at_configure(port, monkeypatch) -> None:
    from lerobot_policy_node.core.errors import PolicyConfigError
    from lerobot_policy_server import images

    monkeypatch.setattr(images, "decodable", lambda: ("raw",))  # a server without OpenCV, or an older one
    server, _ = serve(port)
    try:
        with pytest.raises(PolicyConfigError, match=r"image_encoding jpeg: the policy server at .* decodes only raw"):
            RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=5.0, image_encoding="jpeg")
    finally:
        server.stop(0)


def test_a_server_asking_for_a_token_gets_it_from_the_token_file(port, tmp_path: Path) -> None:
    from lerobot_policy_node.core.errors import PolicyConfigError
    from lerobot_policy_node.core.policies import RemoteAccess
    from lerobot_policy_server.security import ServerSecurity

    security = ServerSecurity(token="t0ken-0123456789abcdef")
    server, _ = start_server(TaskRecorder(6, 15, 30.0, "none"), "127.0.0.1", port, security)
    url = f"grpc://127.0.0.1:{port}"
    try:
        with pytest.raises(PolicyLoadError, match=r"refused Info: the call carries no token.*set remote_token_file"):
            RemotePolicy(url, timeout_s=5.0)
        with pytest.raises(PolicyConfigError, match=r"token file .*absent: cannot read it"):
            RemotePolicy(url, timeout_s=5.0, access=RemoteAccess(token_file=str(tmp_path / "absent")))
        (tmp_path / "token").write_text("t0ken-0123456789abcdef\n")
        policy = RemotePolicy(url, timeout_s=5.0, access=RemoteAccess(token_file=str(tmp_path / "token")))
        observation = {"observation.state": np.zeros(6), "timestamp": 1.0, "task": ""}
        assert policy.predict_chunk(observation).shape == (15, 6)
        policy.close()
    finally:
        server.stop(0)


def test_the_servers_contract_comes_with_info(port) -> None:
    import dataclasses

    served = TaskRecorder(6, 15, 30.0, "none")
    served.info = dataclasses.replace(served.info, contract={"fps": 30, "features": {"action": {"topic": "/a"}}})
    server, _ = serve(port, served)
    try:
        policy = RemotePolicy(f"grpc://127.0.0.1:{port}", timeout_s=5.0)
        assert policy.contract == {"fps": 30, "features": {"action": {"topic": "/a"}}}
        policy.close()
    finally:
        server.stop(0)
