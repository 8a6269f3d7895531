"""The stack on two hosts: robot host (fake SO-101, JPEG cameras, executor) and inference host (the policy).

Two network namespaces joined through a user-space wire that delays and drops frames (harness.py); needs root
(CI runs as root) and skips with the reason otherwise. The policy is a small ACT reading the state and the
cameras; its chunks sit on a target pose, so the arm reaching that pose means the robot host is driven by the
other host's chunks. The default run has one configuration (policy node on the inference host, 1 camera,
5 ms one way, 1 % loss, the inference host's clock 0.5 s ahead); the matrix is marked `multihost_matrix`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from harness import TARGET_DEG, Link, start_stack, summarize, two_hosts, unavailable

pytestmark = pytest.mark.ros

RECORD_S = 6.0


@pytest.fixture
def hosts(tmp_path):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with two_hosts(tmp_path / "hosts") as made:
        yield made


def run_configuration(processes, hosts, tmp_path, ros_env, ros_domain, **options):
    stack = start_stack(processes, hosts, tmp_path, ros_env, ros_domain, record_s=RECORD_S, **options)
    try:
        record = stack.record()
        segments = {host: hosts.shm_segments(host) for host in ("robot", "inference")}
    finally:
        processes.stop_all()
        stack.close()
    return record, summarize(record), segments


def assert_robot_driven_from_the_other_host(record, summary, segments, policy: str) -> None:
    assert record["probe_exit"] == 0, "no chunk reached the robot host"
    assert summary["chunks"] >= 5, summary
    assert {c["policy"] for c in record["chunks"]} == {policy}
    target = np.radians(TARGET_DEG)
    # Every chunk ends on the policy's target pose (ROS units), computed on the other side of the wire.
    assert np.allclose([c["last_step"] for c in record["chunks"]], target, atol=math.radians(0.5))
    # The arm went there: it started away from it and its measured pose ends on it (fake servo resolution 0.09 deg).
    start, last = np.array(record["state_before"]), np.array(record["state_last"])
    assert np.max(np.abs(start - target)) > math.radians(5), start
    assert np.max(np.abs(last - target)) < math.radians(1.0), (last, target)
    # The executor took the chunks, and they kept coming to the end of the window. Whether one came late (a short
    # starvation: the executor holds) depends on this machine's load; bench_multihost.py measures it.
    assert summary["chunks_accepted"] > summary["chunks_rejected"], summary
    end = record["chunks"][0]["receive_ns"] + record["window_s"] * 1e9
    assert any(c["receive_ns"] >= end - 0.25 * record["window_s"] * 1e9 for c in record["chunks"])
    # Frames crossed the wire (observations one way: the cameras' JPEGs to a policy node, or the resized
    # observation to a policy server; chunks the other) and each host's DDS participants used shared memory
    # (the policy server is no DDS participant).
    assert summary["robot_to_inference_mbit_s"] > summary["inference_to_robot_mbit_s"] > 0, summary
    assert segments["robot"] >= 1, segments
    assert segments["inference"] >= (1 if policy.startswith("/") else 0), segments


def test_policy_node_on_the_inference_host_drives_the_robot_through_a_lossy_wire_and_clock_offset(
    processes, hosts, tmp_path, ros_env, ros_domain
):
    record, summary, segments = run_configuration(
        processes, hosts, tmp_path, ros_env, ros_domain,
        variant="node", cameras=1, link=Link(delay_ms=5, loss_percent=1), clock_offset_s=0.5,
    )  # fmt: skip
    assert_robot_driven_from_the_other_host(record, summary, segments, str(tmp_path / "pretrained_model"))
    # The policy host's clock reads 0.5 s ahead of the robot's; the node estimated it (plus the wire's delay).
    assert summary["policy_clock_offset_s"] == pytest.approx(0.5, abs=0.05), record["policy"]


@pytest.mark.multihost_matrix
@pytest.mark.parametrize(
    ("variant", "cameras", "delay_ms", "loss_percent", "offset_s"),
    [("server", 1, 5, 0, 0.0), ("server", 2, 20, 1, 0.0), ("node", 2, 20, 1, -0.5), ("node", 2, 0, 0, 0.5)],
)
def test_two_host_matrix(
    processes, hosts, tmp_path, ros_env, ros_domain, variant, cameras, delay_ms, loss_percent, offset_s
):
    record, summary, segments = run_configuration(
        processes, hosts, tmp_path, ros_env, ros_domain, variant=variant, cameras=cameras,
        link=Link(delay_ms=delay_ms, loss_percent=loss_percent), clock_offset_s=offset_s,
    )  # fmt: skip
    policy = f"grpc://{hosts.address['inference']}:50851" if variant == "server" else str(tmp_path / "pretrained_model")
    assert_robot_driven_from_the_other_host(record, summary, segments, policy)
    if variant == "node":
        assert summary["policy_clock_offset_s"] == pytest.approx(offset_s, abs=0.05), record["policy"]


@pytest.mark.parametrize("host", ["robot", "inference"])
def test_a_host_still_reassembles_camera_datagrams_after_a_burst_of_incomplete_ones(hosts, host):
    # A JPEG crosses as one UDP datagram in ~28 IP fragments; at 1 % frame loss a quarter of them lose one, and
    # with the kernel's defaults (incomplete datagrams kept 30 s, 4 MB in all) the inference host dropped every
    # camera frame from ~25 s of streaming on: observations went stale and no chunk came for ~10 s (issue 36).
    # The hosts are set up as docs/packages/lerobot_ros.md tells users to set theirs up.
    import json
    import subprocess
    import sys

    from harness import HERE

    argv = [sys.executable, str(HERE / "ip_fragments.py"), "--incomplete", "200", "--complete", "5"]
    result = subprocess.run(["ip", "netns", "exec", hosts.ns[host], *argv], capture_output=True, text=True,
                            timeout=60, check=True)  # fmt: skip
    received = json.loads(result.stdout)
    assert received["complete_received"] == 5, received
