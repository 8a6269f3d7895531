"""A port scan of a host running the demo's sim stack, the policy server and the web viewer with default options
finds nothing reachable beyond loopback.

The host is a network namespace with a LAN address (harness.LanNamespace: 10.231.<n>.1 and a ULA, both only
inside it). In it run, each with its default options: the stack `make demo` evaluates with
(launch/sim_policy.launch.yaml: MuJoCo sim bridge with its camera, policy node, action executor; the scripted
policy, as the demo's expert, and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST as scripts/demo.sh exports it),
`lerobot-ros policy-server CHECKPOINT` and `lerobot-ros view CONTRACT --web` (both as a user starts them, without
a discovery range). Then netscan.py lists every listening TCP and bound UDP socket of the namespace and tries
each port from the LAN addresses.

And the web viewer served beyond loopback (`--web --host <LAN address>`): only its token proxy listens there, and
answers only with the token (web_probe.py makes a browser's requests from the LAN address).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from harness import HERE, lan_namespace, make_checkpoint, unavailable, write_contract

from lerobot_policy_server.protocol import DEFAULT_PORT
from lerobot_ros import share
from lerobot_ros.testing import venv_script

pytestmark = [pytest.mark.ros, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

WEB_PORT, DATA_PORT = 9090, 9876


def test_nothing_is_reachable_beyond_loopback_with_default_options(tmp_path, processes, ros_domain):
    checkpoint = make_checkpoint(tmp_path / "pretrained_model", write_contract(tmp_path / "contract.yaml", 1), 1)
    user_env = {k: v for k, v in os.environ.items() if k != "ROS_AUTOMATIC_DISCOVERY_RANGE"}
    demo_env = {**user_env, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "MUJOCO_GL": "egl"}
    with lan_namespace(tmp_path) as lan:
        try:
            scanned = _scan_with_defaults(lan, processes, checkpoint, user_env, demo_env)
        finally:
            processes.stop_all()  # before the namespace and its /dev/shm go
    sockets = [s["label"] for s in scanned["sockets"]]
    listening = {(s["proto"], s["address"], s["port"]) for s in scanned["sockets"]}
    assert not scanned["exposed"], "bound beyond loopback:\n" + "\n".join(scanned["exposed"])
    assert not scanned["reachable"], "reachable from the LAN addresses:\n" + "\n".join(scanned["reachable"])
    # The scan saw the servers it is about (it cannot pass on an empty namespace).
    for port in (WEB_PORT, DATA_PORT, DEFAULT_PORT):
        assert ("tcp", "127.0.0.1", port) in listening, f"nothing on 127.0.0.1:{port}:\n" + "\n".join(sockets)
    assert sum(1 for proto, _, _ in listening if proto == "udp") >= 4, "no DDS sockets:\n" + "\n".join(sockets)


def _scan_with_defaults(lan, processes, checkpoint, user_env, demo_env):
    stack = processes.start(
        lan.command([venv_script("lerobot-ros"), "launch", str(share.find("launch/sim_policy.launch.yaml")),
                     "checkpoint:=scripted"]), name="sim_policy", env=demo_env,
    )  # fmt: skip
    server = processes.start(
        lan.command([venv_script("lerobot-ros"), "policy-server", str(checkpoint)]), name="server", env=user_env
    )
    view = processes.start(
        lan.command([venv_script("lerobot-ros"), "view", str(share.find("config/contracts/so101_sim.yaml")),
                     "--web"]), name="view", env=user_env,
    )  # fmt: skip
    server.wait_for_output(rf"serving .* on \S+:{DEFAULT_PORT}\b", timeout=180)
    view.wait_for_output(r"watching \d+ contract topics", timeout=180)
    stack.wait_for_output(r"action_executor.*active", timeout=240)
    time.sleep(3.0)  # every participant has made its sockets
    for process in (stack, server, view):
        assert process.returncode is None, f"{process.name} exited:\n{process.output()[-3000:]}"
    return lan.scan()


def test_the_web_viewer_beyond_loopback_answers_only_with_the_token(tmp_path, processes, ros_domain):
    from lerobot_dataset import DatasetWriter, FeatureSpec

    spec = FeatureSpec("float32", (2,), ["a.pos", "b.pos"])
    writer = DatasetWriter.create(tmp_path / "ds", repo_id="local/scan", fps=30, features={"action": spec})
    writer.start_episode("wave")
    for step in range(5):
        writer.add_frame({"action": [float(step), 0.0]})
    writer.save_episode()
    writer.close()
    with lan_namespace(tmp_path) as lan:
        try:
            view = processes.start(
                lan.command([venv_script("lerobot-ros"), "dataset", "view", str(tmp_path / "ds"), "--web",
                             "--host", lan.ipv4]), name="view",
            )  # fmt: skip
            url = view.wait_for_output(r"web viewer at (http://\S+)", timeout=120).group(1)
            view.wait_for_output(r"serving the web viewer", timeout=60)
            said = view.output()
            probe = subprocess.run(
                ["ip", "netns", "exec", lan.ns, sys.executable, str(HERE / "web_probe.py"), url, str(DATA_PORT)],
                capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            scanned = lan.scan()
        finally:
            processes.stop_all()
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert url.startswith(f"http://{lan.ipv4}:{WEB_PORT}/?token="), said
    assert f"listening beyond this machine on {lan.ipv4} port {WEB_PORT}" in said, said
    assert seen["no_token"] == 401 and seen["data_without_token"] == 401 and seen["wrong_token"] == 403, seen
    assert seen["with_token"] == 303 and seen["cookie_set"], seen
    assert seen["location"] == f"/?url=rerun%2Bhttp%3A%2F%2F{lan.ipv4}%3A{WEB_PORT}%2Fproxy", seen
    assert seen["page"] == 200 and seen["page_loads_viewer"], seen
    assert seen["data"] == 200 and seen["data_type"] == "application/grpc-web+proto", seen
    assert seen["data_names_recording"], "the data stream through the proxy does not carry the view"
    assert not seen["data_port_on_lan"], "Rerun's data port answers on the LAN address"
    assert scanned["reachable"] == [f"tcp {lan.ipv4} port {WEB_PORT}"], scanned["reachable"]
