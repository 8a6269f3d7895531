"""Two hosts on one machine: a robot host and an inference host joined through a delaying, lossy wire.

Three network namespaces (names `lrp<tag>{r,i,w}`, addresses 10.232.<n>.1 and .2, deleted afterwards): the
robot and inference hosts have no direct link, each has a veth pair into the wire namespace, where `wire.py`
copies Ethernet frames between them with the configured one-way delay and loss. Each host also gets its own
/dev/shm (a tmpfs mounted for the test) and its own /etc/machine-id, so Fast DDS's shared memory works inside a
host and never across. All traffic stays in these namespaces.

The robot host runs the fake-hardware SO-101 (fake servos on a pty + arm_driver), synthetic cameras publishing
JPEG `image_raw/compressed` at 640x480, the action executor and a probe (`probe.py`) that records what the robot
sees; the inference host runs the policy node (variant "node"), or the policy server with the policy node on the
robot host (variant "server"). The policy is a small ACT (random weights, action statistics that put its chunks
on a fixed target pose) reading the state and the cameras.

Used by tests/multihost/test_two_hosts.py and bench/bench_multihost.py. `LanNamespace` is a single host with a
LAN address, for checking what a stack exposes beyond loopback (tests/multihost/test_port_scan.py).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
NAMES = [f"{j}.pos" for j in JOINTS]
FPS = 30
HORIZON = 30
CAMERA_NAMES = ("front", "wrist")
# The policy's target pose (degrees, the contract's units): away from the fake arm's start pose.
TARGET_DEG = np.array([12.0, -10.0, 15.0, 8.0, -6.0, 20.0])
POLICY_IMAGE_SHAPE = (3, 96, 128)
CLOCK_OFFSET_ENV = "LEROBOT_ROS_TEST_CLOCK_OFFSET_S"
# Each host's kernel set up as docs/packages/lerobot_ros.md tells users to set up theirs for the multihost
# profile: a lossy link leaves IP-fragmented datagrams (camera JPEGs) incomplete, and with the defaults (kept
# 30 s, 4 MB in all) the host soon drops every fragmented datagram (ip_fragments.py shows it).
HOST_SYSCTLS = {"net.ipv4.ipfrag_time": "3", "net.ipv4.ipfrag_high_thresh": "134217728"}
# The policy node's /diagnostics values about a policy server's link, kept by `summarize`.
POLICY_LINK_VALUES = ("bottleneck", "advice", "image_encoding", "link_request_bytes", "link_transfer_s")


def unavailable() -> str | None:
    """Why two hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the tests as root)"
    if shutil.which("ip") is None or shutil.which("mount") is None:
        return "iproute2 (`ip`) and `mount` are needed for network namespaces"
    return None


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")


@dataclass(frozen=True)
class Link:
    """What the wire does to every frame, each way."""

    delay_ms: float = 0.0
    loss_percent: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.delay_ms:g} ms, {self.loss_percent:g} % loss"


@dataclass
class TwoHosts:
    """The three namespaces; `up()` makes them, `down()` removes everything (also after a failed `up`)."""

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        subnet = 1 + int(self.tag, 16) % 250
        self.ns = {"robot": f"lrp{self.tag}r", "inference": f"lrp{self.tag}i", "wire": f"lrp{self.tag}w"}
        self.address = {"robot": f"10.232.{subnet}.1", "inference": f"10.232.{subnet}.2"}
        self.host_if = {"robot": f"lrp{self.tag}r0", "inference": f"lrp{self.tag}i0"}
        self.wire_if = {"robot": f"lrp{self.tag}r1", "inference": f"lrp{self.tag}i1"}
        self.shm = {host: self.root / f"shm_{host}" for host in ("robot", "inference")}

    def up(self) -> None:
        for ns in self.ns.values():
            _run(["ip", "netns", "add", ns])
        for host in ("robot", "inference"):
            ns, host_if, wire_if = self.ns[host], self.host_if[host], self.wire_if[host]
            _run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", wire_if])
            _run(["ip", "link", "set", host_if, "netns", ns])
            _run(["ip", "link", "set", wire_if, "netns", self.ns["wire"]])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address[host]}/24", "dev", host_if])
            for link_ns, interface in ((ns, host_if), (ns, "lo"), (self.ns["wire"], wire_if)):
                _run(["ip", "-n", link_ns, "link", "set", interface, "up"])
            _run(["ip", "-n", self.ns["wire"], "link", "set", wire_if, "promisc", "on"])
            # Multicast (DDS discovery) needs a route; everything leaves through the wire anyway.
            _run(["ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", host_if])
            _run(["ip", "netns", "exec", ns, sys.executable, str(HERE / "wire.py"), "--offload-off", host_if])
            for name, value in HOST_SYSCTLS.items():
                _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{name}={value}"])
            self.shm[host].mkdir(parents=True, exist_ok=True)
            _run(["mount", "-t", "tmpfs", "-o", "size=512m", f"lrp{self.tag}", str(self.shm[host])])
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "machine-id").write_text(uuid.uuid4().hex + "\n")

    def down(self) -> None:
        for host in ("robot", "inference"):
            subprocess.run(["umount", "-l", str(self.shm[host])], capture_output=True, check=False)
            shutil.rmtree(Path("/etc/netns") / self.ns[host], ignore_errors=True)
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)

    def limit_rate(self, host: str, mbit_s: float) -> None:
        """Everything `host` sends goes through a token bucket of `mbit_s` (tbf; this kernel has no netem).

        The queue holds 200 ms at that rate: a burst beyond it is dropped, as a saturated link's router would."""
        _run(["ip", "netns", "exec", self.ns[host], "tc", "qdisc", "replace", "dev", self.host_if[host], "root",
              "tbf", "rate", f"{mbit_s:g}mbit", "burst", "16kb", "latency", "200ms"])  # fmt: skip

    def command(self, host: str, argv: list[str]) -> list[str]:
        """`argv` run on `host` (its network namespace, /dev/shm and machine-id)."""
        mount = 'mount --bind "$0" /dev/shm && exec "$@"'
        return ["ip", "netns", "exec", self.ns[host], "sh", "-c", mount, str(self.shm[host]), *argv]

    def wire_command(self, link: Link, stats: Path, seed: int = 1) -> list[str]:
        return ["ip", "netns", "exec", self.ns["wire"], sys.executable, str(HERE / "wire.py"),
                "--a", self.wire_if["robot"], "--b", self.wire_if["inference"], "--delay-ms", str(link.delay_ms),
                "--loss-percent", str(link.loss_percent), "--seed", str(seed), "--stats", str(stats)]  # fmt: skip

    def env(self, base: Mapping[str, str], domain_id: int) -> dict[str, str]:
        return host_env(base, domain_id)

    def shm_segments(self, host: str) -> int:
        """Fast DDS shared-memory segments in `host`'s /dev/shm."""
        return sum(1 for p in self.shm[host].iterdir() if re.fullmatch(r"fastdds_[0-9a-f]{16}", p.name))


@dataclass
class OneHost:
    """The baseline: every process on this machine's network, the shared-memory profile, no wire."""

    address: dict[str, str] = field(default_factory=lambda: {"robot": "127.0.0.1", "inference": "127.0.0.1"})

    def command(self, host: str, argv: list[str]) -> list[str]:
        return list(argv)

    def env(self, base: Mapping[str, str], domain_id: int) -> dict[str, str]:
        from lerobot_ros.dds import ros_environment

        env = ros_environment(dict(base), profile="shm")
        env["ROS_DOMAIN_ID"] = str(domain_id)
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        return env


@contextmanager
def two_hosts(root: Path) -> Iterator[TwoHosts]:
    hosts = TwoHosts(root)
    try:
        hosts.up()
        yield hosts
    finally:
        hosts.down()


@dataclass
class LanNamespace:
    """One network namespace that has a LAN: `lo`, and a veth pair whose two ends both stay inside, one carrying
    10.231.<n>.1/24 and the ULA fd6c:7270:<n>::1/64 (IPv6 where the kernel has it). Nothing leaves the namespace.

    Its processes (`command`) also get their own /dev/shm (a tmpfs mounted for it and unmounted by `down()`), so
    Fast DDS segments never outlive it. `up()` makes it, `down()` removes everything (also after a failed `up`).
    """

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        subnet = 1 + int(self.tag, 16) % 250
        self.ns = f"lrp{self.tag}l"
        self.lan_if, self.peer_if = f"lrp{self.tag}l0", f"lrp{self.tag}l1"
        self.ipv4 = f"10.231.{subnet}.1"
        self.ipv6 = f"fd6c:7270:{subnet:x}::1"
        self.addresses: list[str] = []
        self.shm = self.root / "shm_lan"

    def up(self) -> None:
        _run(["ip", "netns", "add", self.ns])
        _run(["ip", "-n", self.ns, "link", "add", self.lan_if, "type", "veth", "peer", "name", self.peer_if])
        _run(["ip", "-n", self.ns, "addr", "add", f"{self.ipv4}/24", "dev", self.lan_if])
        self.addresses = [self.ipv4]
        if Path("/proc/sys/net/ipv6").exists():
            _run(["ip", "-n", self.ns, "addr", "add", f"{self.ipv6}/64", "dev", self.lan_if, "nodad"])
            self.addresses.append(self.ipv6)
        for interface in ("lo", self.lan_if, self.peer_if):
            _run(["ip", "-n", self.ns, "link", "set", interface, "up"])
        self.shm.mkdir(parents=True, exist_ok=True)
        _run(["mount", "-t", "tmpfs", "-o", "size=512m", f"lrp{self.tag}", str(self.shm)])

    def down(self) -> None:
        subprocess.run(["umount", "-l", str(self.shm)], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "delete", self.ns], capture_output=True, check=False)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace, with its own /dev/shm."""
        mount = 'mount --bind "$0" /dev/shm && exec "$@"'
        return ["ip", "netns", "exec", self.ns, "sh", "-c", mount, str(self.shm), *argv]

    def scan(self) -> dict[str, Any]:
        """netscan.py run inside the namespace against its LAN addresses (see that module)."""
        argv = [sys.executable, str(HERE / "netscan.py")]
        for address in self.addresses:
            argv += ["--address", address]
        result = subprocess.run(["ip", "netns", "exec", self.ns, *argv], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"netscan.py failed: {result.stderr.strip()}")
        scanned: dict[str, Any] = json.loads(result.stdout)
        return scanned


@contextmanager
def lan_namespace(root: Path) -> Iterator[LanNamespace]:
    lan = LanNamespace(root)
    try:
        lan.up()
        yield lan
    finally:
        lan.down()


def host_env(base: Mapping[str, str], domain_id: int) -> dict[str, str]:
    """The ROS environment of a process on one of the hosts: the multi-host profile, SUBNET discovery."""
    from lerobot_ros.dds import PROFILE_ENV, ros_environment

    env = {k: v for k, v in base.items() if k not in (PROFILE_ENV, "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_STATIC_PEERS")}
    env = ros_environment(env, profile="multihost")
    env["ROS_DOMAIN_ID"] = str(domain_id)
    return env


def write_contract(path: Path, cameras: int, camera_size: tuple[int, int] = (640, 480)) -> Path:
    vector = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": NAMES, "units": "rad_to_deg"}
    features: dict[str, Any] = {"observation.state": {**vector, "topic": "/follower/joint_states", "max_age_s": 0.2}}
    for name in CAMERA_NAMES[:cameras]:
        features[f"observation.images.{name}"] = {
            "topic": f"/cameras/{name}/image_raw/compressed",
            "type": "sensor_msgs/msg/CompressedImage",
            "shape": [camera_size[1], camera_size[0], 3],
            "max_age_s": 0.2,
        }
    features["action"] = {**vector, "topic": "/follower/joint_commands"}
    path.write_text(yaml.safe_dump({"robot_type": "so101_follower", "fps": FPS, "features": features}, sort_keys=False))
    return path


def make_checkpoint(directory: Path, contract: Path, cameras: int) -> Path:
    """A small ACT reading the state and `cameras` cameras; its chunks sit on TARGET_DEG (+- 0.05 degrees)."""
    import torch

    from lerobot_training.checkpoint import save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    torch.manual_seed(0)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (6,), tuple(NAMES))}
    for name in CAMERA_NAMES[:cameras]:
        inputs[f"observation.images.{name}"] = PolicyFeature(FeatureType.VISUAL, POLICY_IMAGE_SHAPE)
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), tuple(NAMES))}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=HORIZON, n_action_steps=HORIZON, dim_model=64,
        n_heads=2, dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
    )  # fmt: skip
    ones = torch.ones(6)
    stats = {
        "observation.state": {"mean": torch.zeros(6), "std": 30 * ones, "min": -90 * ones, "max": 90 * ones},
        "action": {
            "mean": torch.tensor(TARGET_DEG, dtype=torch.float32),
            "std": 0.01 * ones,
            "min": torch.tensor(TARGET_DEG, dtype=torch.float32) - 1,
            "max": torch.tensor(TARGET_DEG, dtype=torch.float32) + 1,
        },
    }
    for name in CAMERA_NAMES[:cameras]:
        stats[f"observation.images.{name}"] = {
            "mean": torch.full((3, 1, 1), 0.5),
            "std": torch.full((3, 1, 1), 0.25),
            "min": torch.zeros(3, 1, 1),
            "max": torch.ones(3, 1, 1),
        }
    save_policy(directory, ACTPolicy(config, stats), fps=FPS, contract=yaml.safe_load(contract.read_text()))
    return directory


@dataclass
class Stack:
    """What `start_stack` started (processes are stopped by the ProcessGroup; call `close()` for the pty)."""

    hosts: TwoHosts | OneHost
    processes: dict[str, Any]
    pty: Any
    wire_stats: Path
    probe_out: Path
    record_s: float

    def close(self) -> None:
        self.pty.stop()

    def record(self, timeout_s: float = 300.0) -> dict[str, Any]:
        """Wait for the probe (started before the policy) to finish its window; returns its JSON."""
        probe = self.processes["probe"]
        code = probe.wait(timeout=self.record_s + timeout_s)
        if not self.probe_out.exists():
            raise AssertionError(f"probe exited {code} without results:\n{probe.output()[-3000:]}")
        result: dict[str, Any] = json.loads(self.probe_out.read_text())
        result["probe_exit"] = code
        return result


def start_stack(
    group: Any,
    hosts: TwoHosts | OneHost,
    workdir: Path,
    base_env: Mapping[str, str],
    domain_id: int,
    *,
    variant: str = "node",
    cameras: int = 1,
    link: Link = Link(),
    clock_offset_s: float = 0.0,
    checkpoint: Path | None = None,
    server_port: int = 50851,
    record_s: float = 6.0,
    camera_size: tuple[int, int] = (640, 480),
    rate_mbit_s: float | None = None,
    server_argv: list[str] | None = None,
    policy_params: tuple[str, ...] = (),
) -> Stack:
    """Start the wire, the robot host's nodes and the inference host's policy (see the module docstring).

    `group` is a lerobot_ros.testing.ProcessGroup; `clock_offset_s` shifts the clock of the policy node when it
    runs on the inference host (variant "node"). `camera_size`: (width, height) of the cameras and the contract;
    `rate_mbit_s`: a token bucket on both hosts' links; `server_argv`: variant "server" runs this server (it
    prints "serving ... PORT") instead of `lerobot-ros policy-server`; `policy_params`: more ``name:=value``
    parameters of the policy node.
    """
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.fake.arms import fake_arm_bus
    from lerobot_drivers.fake.bus import PtyServoBus
    from lerobot_drivers.motors.calibration import save_calibration
    from lerobot_ros.testing import venv_script

    if variant not in ("node", "server"):
        raise ValueError(f"variant must be 'node' or 'server', got {variant!r}")
    env = hosts.env(base_env, domain_id)
    contract = write_contract(workdir / "contract.yaml", cameras, camera_size)
    if checkpoint is None and server_argv is None:
        checkpoint = make_checkpoint(workdir / "pretrained_model", contract, cameras)
    stats = workdir / "wire.json"
    started: dict[str, Any] = {}
    if isinstance(hosts, TwoHosts):
        started["wire"] = group.start(hosts.wire_command(link, stats), name="wire", env=env)
        started["wire"].wait_for_output("wire up", timeout=30)
        if rate_mbit_s is not None:
            for host in ("robot", "inference"):
                hosts.limit_rate(host, rate_mbit_s)

    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    pty = PtyServoBus(fake_arm_bus(spec, calibration))
    pty.start()
    cal_file = workdir / "so101.json"
    save_calibration(cal_file, calibration)
    robot_config = workdir / "robot.yaml"
    robot_config.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": {
        "robot_type": "so101_follower", "calibration_file": str(cal_file)}}}))  # fmt: skip
    ns = ["-r", "__ns:=/follower"]

    def on(host: str, argv: list[str], name: str, extra_env: Mapping[str, str] | None = None) -> Any:
        started[name] = group.start(hosts.command(host, argv), name=name, env={**env, **(extra_env or {})})
        return started[name]

    on("robot", [venv_script("arm_driver"), "--ros-args", *ns, "-p", f"port:={pty.port}",
                 "-p", f"calibration_file:={cal_file}", "-p", "loop_rate:=50.0", "-p", "command_timeout:=0.5",
                 "-p", "bus_timeout:=0.1", "-p", "bus_retries:=4", "-p", "connect_timeout:=10.0"],
       "driver")  # fmt: skip
    for name in CAMERA_NAMES[:cameras]:
        on("robot", [venv_script("camera"), "--ros-args", "-r", f"__ns:=/cameras/{name}", "-r", f"__node:={name}",
                     "-p", "device:=synthetic", "-p", f"width:={camera_size[0]}", "-p", f"height:={camera_size[1]}",
                     "-p", "fps:=30.0",
                     "-p", "publish_raw:=false", "-p", "publish_compressed:=true"], f"camera_{name}")  # fmt: skip
    on("robot", [venv_script("action_executor"), "--ros-args", *ns, "-p", "output:=joint_commands",
                 "-p", f"robot_config:={robot_config}", "-p", "rate:=50.0", "-p", "diagnostics_period:=0.25",
                 "-p", "max_velocity:=1.5"], "executor")  # fmt: skip
    for name in ("driver", "executor"):
        started[name].wait_for_output("active", timeout=180)
    # The probe starts before the policy, which starts once the probe has seen the arm's pose (before any chunk).
    probe_out = workdir / "probe.json"
    on("robot", [sys.executable, str(HERE / "probe.py"), "--out", str(probe_out), "--duration", str(record_s),
                 "--timeout", "300", *(["--wire-stats", str(stats)] if isinstance(hosts, TwoHosts) else [])],
       "probe")  # fmt: skip
    started["probe"].wait_for_output("pose seen", timeout=180)
    policy_args = ["-p", f"contract:={contract}", "-p", "threshold:=0.0", "-p", "margin:=0.1"]
    policy_args += [arg for param in policy_params for arg in ("-p", param)]
    if variant == "node":
        on("inference", [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:={checkpoint}", *policy_args],
           "policy", {CLOCK_OFFSET_ENV: str(clock_offset_s)} if clock_offset_s else None)  # fmt: skip
    else:
        token = workdir / "policy_server.token"  # listening beyond loopback, the server asks for a token
        token.write_text(secrets.token_hex(16))
        argv = server_argv or [venv_script("lerobot-ros"), "policy-server", str(checkpoint), "--port", str(server_port),
                               "--host", hosts.address["inference"], "--token-file", str(token)]  # fmt: skip
        server = on("inference", argv, "server")
        server.wait_for_output(rf"serving .*\b{server_port}\b", timeout=180)
        address = f"grpc://{hosts.address['inference']}:{server_port}"
        on("robot", [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:={address}",
                     "-p", f"remote_token_file:={token}", *policy_args], "policy")  # fmt: skip
    for name in ("driver", "executor", "policy"):
        started[name].wait_for_output("active", timeout=180)
    return Stack(hosts, started, pty, stats, probe_out, record_s)


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """Latency, starvation and bandwidth of one probe window."""
    wire_before, wire_after = record["wire"].get("before"), record["wire"].get("after")
    chunks = record["chunks"]
    latency = np.array([(c["receive_ns"] - c["stamp_ns"]) / 1e9 for c in chunks]) if chunks else np.zeros(0)
    inference = np.array([c["inference_time"] for c in chunks]) if chunks else np.zeros(0)
    window = record["window_s"]
    diag = record["executor"]
    starvation = diag["last"].get("starvation_s", 0.0) - diag["first"].get("starvation_s", 0.0)
    bandwidth = {}
    if wire_before and wire_after:
        span = max(wire_after["time"] - wire_before["time"], 1e-9)
        for direction in ("a_to_b", "b_to_a"):
            before, after = wire_before[direction], wire_after[direction]
            name = {"a_to_b": "robot_to_inference", "b_to_a": "inference_to_robot"}[direction]
            bandwidth[f"{name}_mbit_s"] = (after["bytes"] - before["bytes"]) * 8 / span / 1e6
            bandwidth[f"{name}_dropped"] = after["dropped"] - before["dropped"]
    return {
        "chunks": len(chunks),
        "chunks_per_s": len(chunks) / window if window else 0.0,
        "latency_p50_ms": float(np.percentile(latency, 50) * 1e3) if latency.size else None,
        "latency_p95_ms": float(np.percentile(latency, 95) * 1e3) if latency.size else None,
        "inference_p50_ms": float(np.percentile(inference, 50) * 1e3) if inference.size else None,
        "starvation_s": float(starvation),
        "starvation_fraction": float(starvation / window) if window else None,
        "executor_starved_at_end": diag["last"].get("starved") == "true",
        "chunks_accepted": int(diag["last"].get("chunks_accepted", 0) - diag["first"].get("chunks_accepted", 0)),
        "chunks_rejected": int(diag["last"].get("chunks_rejected", 0) - diag["first"].get("chunks_rejected", 0)),
        "policy_clock_offset_s": record.get("policy", {}).get("clock_offset_s"),
        **{f"policy_{key}": record.get("policy", {}).get(key) for key in POLICY_LINK_VALUES},
        "window_s": window,
        **bandwidth,
    }


@dataclass
class ServerAndPeers:
    """A server host and two client hosts, each client host on its own veth link to the server host (addresses
    10.233.<n>.1 / .2 and 10.234.<n>.1 / .2; namespaces `lrp<tag>{s,c,a}`): a real client and an attacker with
    different addresses. Nothing leaves the namespaces. `up()` makes them, `down()` removes them."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        subnet = 1 + int(self.tag, 16) % 250
        self.ns = {"server": f"lrp{self.tag}s", "client": f"lrp{self.tag}c", "attacker": f"lrp{self.tag}a"}
        # The server's address on each link, and each peer's own.
        self.server_address = {"client": f"10.233.{subnet}.1", "attacker": f"10.234.{subnet}.1"}
        self.address = {"client": f"10.233.{subnet}.2", "attacker": f"10.234.{subnet}.2"}

    def up(self) -> None:
        for ns in self.ns.values():
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        for peer in ("client", "attacker"):
            server_if, peer_if = f"lrp{self.tag}{peer[0]}0", f"lrp{self.tag}{peer[0]}1"
            _run(["ip", "link", "add", server_if, "type", "veth", "peer", "name", peer_if])
            for interface, host, address in (
                (server_if, "server", self.server_address[peer]),
                (peer_if, peer, self.address[peer]),
            ):
                _run(["ip", "link", "set", interface, "netns", self.ns[host]])
                _run(["ip", "-n", self.ns[host], "addr", "add", f"{address}/24", "dev", interface])
                _run(["ip", "-n", self.ns[host], "link", "set", interface, "up"])

    def down(self) -> None:
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)

    def command(self, host: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns[host], *argv]


@contextmanager
def server_and_peers() -> Iterator[ServerAndPeers]:
    hosts = ServerAndPeers()
    try:
        hosts.up()
        yield hosts
    finally:
        hosts.down()


DOS_PEERS = HERE / "dos_peers.py"
# Attacks of dos_peers.py and their sizes (connections; callers in flight for "unauthenticated").
DOS_QUICK = {"preface": 20, "silent": 20, "unauthenticated": 8}
DOS_FULL = {"preface": 200, "silent": 200, "unauthenticated": 32}


def _on_cpu(host: str, argv: list[str]) -> list[str]:
    """`argv` pinned so that the attacker, a host of its own, does not spend the server's and the client's CPU:
    the attacker on the last CPU this process may use, the server and the client on the first (unpinned with
    fewer than 2 CPUs or without `taskset`)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return argv
    return ["taskset", "-c", str(cpus[-1] if host == "attacker" else cpus[0]), *argv]


def run_attacks(processes: Any, token_file: Path, sizes: Mapping[str, int], calls: int) -> dict[str, dict[str, Any]]:
    """The authorized client's `calls` Predict calls through a policy server with a token (on its own host,
    beyond loopback: behind its connection front), alone and beside each attack of `sizes` from the attacker's
    host, a fresh server per attack (a ban from one attack would hold through the next): per attack, ``idle``
    and ``attacked``, each the client's codes, latencies (s) and the server's Stats counts (dos_peers.py).
    `processes` is the `lerobot_ros.testing` fixture."""
    token_file.write_text(secrets.token_hex(16))
    results: dict[str, dict[str, Any]] = {}
    with server_and_peers() as hosts:
        try:

            def client(name: str) -> dict[str, Any]:
                argv = [sys.executable, str(DOS_PEERS), "client", hosts.server_address["client"], str(token_file)]
                run = processes.start(hosts.command("client", _on_cpu("client", [*argv, str(calls)])), name=name)
                assert run.wait(timeout=600) == 0, run.output()
                result: dict[str, Any] = json.loads(run.output().strip().splitlines()[-1])
                return result

            for kind, count in sizes.items():
                argv = [sys.executable, str(DOS_PEERS), "server", str(token_file)]
                server = processes.start(hosts.command("server", _on_cpu("server", argv)), name=f"server_{kind}")
                server.wait_for_output(r"serving \d+", timeout=120)
                idle = client(f"client_idle_{kind}")
                argv = [sys.executable, str(DOS_PEERS), "attack", hosts.server_address["attacker"], kind, str(count)]
                attacker = processes.start(hosts.command("attacker", _on_cpu("attacker", [*argv, "600"])),
                                           name=f"attack_{kind}")  # fmt: skip
                attacker.wait_for_output("attacking", timeout=120)
                results[kind] = {"idle": idle, "attacked": client(f"client_{kind}")}
                attacker.stop()
                server.stop()
        finally:
            processes.stop_all()  # before the namespaces go
    return results


def p99(latencies: list[float]) -> float:
    return float(np.percentile(latencies, 99))
