"""The policy on another host: observation -> chunk latency, executor starvation and bandwidth per configuration.

Writes bench/results/multihost.json. Each configuration starts the two-host stack of tests/multihost/harness.py
(robot host: fake SO-101, synthetic 640x480 cameras publishing JPEG, action executor; inference host: the policy
node, or the policy server with the policy node on the robot host; a user-space wire between them that delays
and drops Ethernet frames) and records `--record` s on the robot host from the first chunk:

- latency: chunk receive time at the robot - the chunk's stamp (its observation's time), both on the robot's
  clock: sampling wait + transfer of the observation + inference + transfer of the chunk;
- starvation: seconds the executor held for lack of a chunk covering now, over the window;
- bandwidth: bytes through the wire each way over the window.

The baseline is the same stack on one host (no namespaces, the shared-memory profile), same run. The policy is a
small ACT (random weights, state + cameras resized to 96x128), so inference is short and the network shows.
Needs root (network namespaces). The default run is short (1 camera: one host, two hosts at 0 ms and at 20 ms +
1 % loss, the policy node on the inference host); `--full` runs both variants x 1 and 2 cameras x 0/5/20 ms x
0/1 % loss (28 stacks, about 40 min here); `--variants/--cameras/--links` pick a part of it.

`--compression` instead compares how camera images travel to a policy server over a rate-limited link (tbf,
`--rate` Mbit/s each way, default 5): raw vs PNG vs JPEG (quality 90), and raw with two inference workers, in
one run against one server (tests/multihost/link_client.py: the policy node's scheduler, executor starvation
accounting and bottleneck advice around `RemotePolicy`; a numpy policy taking one 240x320 camera, 15-step chunks
at 30 fps, no model time, so the link is what is measured). `--stack` adds the whole two-host stack (policy node,
executor, a 320x240 camera, that server) per `image_encoding`, starvation as the executor node reports it.
Writes bench/results/multihost_compression.json.

Usage: sudo .venv/bin/python bench/bench_multihost.py [--full] [--variants node,server] [--cameras 1,2]
       [--links 0:0,5:0,20:1] [--record 10]
       sudo .venv/bin/python bench/bench_multihost.py --compression [--stack] [--rate 5] [--record 20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headline import figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "tests" / "multihost"))

from harness import Link, OneHost, make_checkpoint, start_stack, summarize, two_hosts, unavailable, write_contract  # noqa: E402

FAKE_SERVER = ROOT / "tests" / "policy_server" / "fake_policy_server.py"
LINK_CLIENT = ROOT / "tests" / "multihost" / "link_client.py"
# (image encoding, inference workers) compared over the limited link.
COMPRESSION_RUNS = (("raw", 1), ("raw", 2), ("png", 1), ("jpeg", 1))


def run_one(
    hosts: Any,
    workdir: Path,
    variant: str,
    cameras: int,
    link: Link,
    record_s: float,
    checkpoints: dict[int, Path | None],
    server_argv: Callable[[int], list[str]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """One stack for `record_s` s; `server_argv(port)` replaces the policy server; `options` go to start_stack."""
    from lerobot_ros.dds import clean_stale_shm
    from lerobot_ros.testing import ProcessGroup, lease_domain

    workdir.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:  # the one-host server shares this machine's ports
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lease = lease_domain()
    group = ProcessGroup(dict(os.environ), workdir / "logs")
    stack = None
    failure = ""
    try:
        stack = start_stack(
            group, hosts, workdir, dict(os.environ), lease.domain_id, variant=variant, cameras=cameras, link=link,
            checkpoint=checkpoints[cameras], record_s=record_s, server_port=port,
            server_argv=server_argv(port) if server_argv else None, **options,
        )  # fmt: skip
        record = stack.record()
    except (AssertionError, RuntimeError) as err:  # a configuration that does not run is a result too
        failure = str(err).splitlines()[0] + " " + " ".join(str(err).splitlines()[1:3])
    finally:
        group.stop_all()
        if stack is not None:
            stack.close()
        lease.release()
        clean_stale_shm()
    if failure:
        return {"error": failure[:500]}
    summary = summarize(record)
    summary["probe_exit"] = record["probe_exit"]
    return summary


def configurations(full: bool, variants: str, cameras: str, links: str) -> list[tuple[str, int, Link]]:
    if full:
        variants, cameras, links = "node,server", "1,2", "0:0,0:1,5:0,5:1,20:0,20:1"
    wires = [Link(float(d), float(loss)) for d, loss in (item.split(":") for item in links.split(","))]
    return [(v, int(c), link) for v, c, link in itertools.product(variants.split(","), cameras.split(","), wires)]


def markdown_table(runs: list[dict[str, Any]]) -> str:
    """The runs as the README's table."""

    def cell(value: Any, digits: int = 0) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [
        "| hosts | policy on the inference host | cameras | wire (one way) | latency p50 / p95 (ms) "
        "| inference p50 (ms) | starvation (% of time) | robot->inference (Mbit/s) | inference->robot (Mbit/s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        where = "-" if run["hosts"] == 1 else {"node": "policy node", "server": "policy server"}[run["variant"]]
        wire = "-" if run["hosts"] == 1 else f"{run['delay_ms']:g} ms, {run['loss_percent']:g} % loss"
        starvation = run.get("starvation_fraction")
        if "error" in run:
            failed = f"failed: {run['error'][:80]}"
            lines.append(f"| {run['hosts']} | {run['variant']} | {run['cameras']} | {wire} | {failed} |")
            continue
        lines.append(
            f"| {run['hosts']} | {where if run['hosts'] == 2 else run['variant'] + ' (one host)'} | {run['cameras']} | "
            f"{wire} | {cell(run.get('latency_p50_ms'))} / {cell(run.get('latency_p95_ms'))} | "
            f"{cell(run.get('inference_p50_ms'))} | {cell(None if starvation is None else 100 * starvation, 1)} | "
            f"{cell(run.get('robot_to_inference_mbit_s'), 2)} | {cell(run.get('inference_to_robot_mbit_s'), 2)} |"
        )
    return "\n".join(lines)


def camera_server(port: int) -> list[str]:
    """The numpy policy server taking the state and one 240x320 camera, 15-step chunks at 30 fps."""
    return [sys.executable, str(FAKE_SERVER), "--port", str(port), "--host", "0.0.0.0", "--camera", "240x320",
            "--horizon", "15", "--fps", "30"]  # fmt: skip


def compression(root: Path, rate_mbit_s: float, record_s: float, port: int = 50858) -> list[dict[str, Any]]:
    """Each of COMPRESSION_RUNS for `record_s` s through one tbf-limited link to one server (same run)."""
    from lerobot_ros.testing import ProcessGroup

    runs = []
    group = ProcessGroup(dict(os.environ), root / "compression_logs")
    with two_hosts(root / "hosts_compression") as hosts:
        try:
            wire = group.start(hosts.wire_command(Link(), root / "wire_compression.json"), name="wire")
            wire.wait_for_output("wire up", timeout=30)
            for host in ("robot", "inference"):
                hosts.limit_rate(host, rate_mbit_s)
            server = group.start(hosts.command("inference", camera_server(port)), name="server")
            server.wait_for_output(f"serving on {port}", timeout=60)
            url = f"grpc://{hosts.address['inference']}:{port}"
            for encoding, workers in COMPRESSION_RUNS:
                argv = [sys.executable, str(LINK_CLIENT), "--url", url, "--encoding", encoding, "--workers",
                        str(workers), "--duration", str(record_s)]  # fmt: skip
                client = group.start(hosts.command("robot", argv), name=f"client_{encoding}_{workers}")
                code = client.wait(timeout=record_s + 180)
                lines = [line for line in client.output().splitlines() if line.startswith("RESULT ")]
                result = json.loads(lines[-1][7:]) if lines else {"error": f"exit {code}: {client.output()[-300:]}"}
                runs.append({"encoding": encoding, "workers": workers, "rate_mbit_s": rate_mbit_s, **result})
                print(json.dumps(runs[-1]), flush=True)
        finally:
            group.stop_all()
    return runs


def compression_stacks(root: Path, rate_mbit_s: float, record_s: float) -> list[dict[str, Any]]:
    """The whole stack (variant server: camera 320x240 publishing JPEG topics, policy node and executor on the robot
    host) with the numpy policy server of `compression`, once per image encoding of the policy node."""
    stacks = []
    for index, encoding in enumerate(("raw", "png", "jpeg")):
        started = time.monotonic()
        with two_hosts(root / f"hosts_stack_{index}") as hosts:
            summary = run_one(hosts, root / f"stack_{index}", "server", 1, Link(), record_s, {1: None}, camera_server,
                              camera_size=(320, 240), rate_mbit_s=rate_mbit_s,
                              policy_params=(f"image_encoding:={encoding}",))  # fmt: skip
        stacks.append({"encoding": encoding, "rate_mbit_s": rate_mbit_s, **summary})
        print(f"stack, {encoding}: {json.dumps(stacks[-1])} ({time.monotonic() - started:.0f} s)", flush=True)
    return stacks


def compression_main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench_multihost_") as scratch:
        runs = compression(Path(scratch), args.rate, args.record)
        stacks = compression_stacks(Path(scratch), args.rate, args.record) if args.stack else []

    def find(encoding: str, workers: int = 1) -> dict[str, Any]:
        return next((r for r in runs if (r["encoding"], r["workers"]) == (encoding, workers)), {})

    raw, jpeg = find("raw"), find("jpeg")
    baseline_what = f"raw images, 1 worker, same link ({args.rate:g} Mbit/s tbf) and server, same run"
    headline = [
        figure(f"executor starvation, JPEG q90 images over {args.rate:g} Mbit/s, 1 camera 240x320",
               jpeg.get("starvation_fraction"), "fraction of time", baseline=raw.get("starvation_fraction"),
               baseline_what=baseline_what, target="<= 0.05"),
        figure("executor starvation, PNG images", find("png").get("starvation_fraction"), "fraction of time",
               baseline=raw.get("starvation_fraction"), baseline_what=baseline_what),
        figure("executor starvation, raw images, 2 inference workers", find("raw", 2).get("starvation_fraction"),
               "fraction of time", baseline=raw.get("starvation_fraction"), baseline_what=baseline_what),
        figure("request size, JPEG q90", jpeg.get("request_bytes"), "bytes", baseline=raw.get("request_bytes"),
               baseline_what=baseline_what),
    ]  # fmt: skip
    stack = {run["encoding"]: run for run in stacks}
    if stacks:
        headline.append(figure(
            f"executor node starvation, policy node with image_encoding jpeg, policy server over {args.rate:g} Mbit/s",
            stack["jpeg"].get("starvation_fraction"), "fraction of time",
            baseline=stack["raw"].get("starvation_fraction"), baseline_what="the same stack with image_encoding raw, "
            "same run", target="<= 0.05",
        ))  # fmt: skip
    results = {
        "benchmark": "multihost_compression",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
        "record_s": args.record,
        "rate_mbit_s": args.rate,
        "runs": runs,
        "stacks": stacks,
        "headline": headline,
    }
    out = args.out if args.out != RESULTS / "multihost.json" else RESULTS / "multihost_compression.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(headline, indent=2))
    print("| images | workers | request (kB) | on the wire (s) | starvation (% of time) | bottleneck |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        if "error" in run:
            print(f"| {run['encoding']} | {run['workers']} | failed: {run['error'][:80]} |")
            continue
        print(f"| {run['encoding']} | {run['workers']} | {run['request_bytes'] / 1000:.1f} | {run['transfer_s']:.3f} "
              f"| {100 * run['starvation_fraction']:.1f} | {run['bottleneck']} |")  # fmt: skip
    for run in stacks:
        print(f"stack {run['encoding']}: starvation {run.get('starvation_fraction')}, latency p50 "
              f"{run.get('latency_p50_ms')} ms, robot->inference {run.get('robot_to_inference_mbit_s')} Mbit/s, "
              f"policy node: {run.get('policy_bottleneck')} {run.get('policy_advice')!r}")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="both variants x 1/2 cameras x 0/5/20 ms x 0/1 %% loss")
    parser.add_argument("--variants", default="node", help="node (policy node on the inference host), server")
    parser.add_argument("--cameras", default="1", help="camera counts, e.g. 1,2")
    parser.add_argument("--links", default="0:0,20:1", help="one-way delay ms:loss %% pairs, e.g. 0:0,5:0,20:1")
    parser.add_argument("--record", type=float, default=10.0, help="seconds recorded per configuration")
    parser.add_argument("--out", type=Path, default=RESULTS / "multihost.json")
    parser.add_argument("--compression", action="store_true", help="raw vs PNG vs JPEG images to a policy server")
    parser.add_argument("--rate", type=float, default=5.0, help="--compression: link rate, Mbit/s each way")
    parser.add_argument("--stack", action="store_true", help="--compression: also the whole stack per encoding")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(f"bench_multihost: {reason}")
    if args.compression:
        return compression_main(args)
    runs: list[dict[str, Any]] = []
    configs = configurations(args.full, args.variants, args.cameras, args.links)
    with tempfile.TemporaryDirectory(prefix="bench_multihost_") as scratch:
        root = Path(scratch)
        checkpoints = {}
        for cameras in sorted({c for _, c, _ in configs}):
            contract = write_contract(root / f"contract_{cameras}.yaml", cameras)
            checkpoints[cameras] = make_checkpoint(root / f"policy_{cameras}cam", contract, cameras)
        baseline_variants = sorted({(v, c) for v, c, _ in configs})
        for index, (variant, cameras) in enumerate(baseline_variants):
            started = time.monotonic()
            summary = run_one(OneHost(), root / f"one_{index}", variant, cameras, Link(), args.record, checkpoints)
            runs.append({"hosts": 1, "variant": variant, "cameras": cameras, "delay_ms": 0, "loss_percent": 0,
                         **summary})  # fmt: skip
            took = time.monotonic() - started
            print(f"one host, {variant}, {cameras} camera(s): {json.dumps(summary)} ({took:.0f} s)", flush=True)
        for index, (variant, cameras, link) in enumerate(configs):
            started = time.monotonic()
            with two_hosts(root / f"hosts_{index}") as hosts:
                summary = run_one(hosts, root / f"two_{index}", variant, cameras, link, args.record, checkpoints)
            runs.append({"hosts": 2, "variant": variant, "cameras": cameras, "delay_ms": link.delay_ms,
                         "loss_percent": link.loss_percent, **summary})  # fmt: skip
            print(f"two hosts, {variant}, {cameras} camera(s), {link.label}: {json.dumps(summary)} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip

    def find(hosts: int, variant: str, cameras: int, delay: float = 0, loss: float = 0) -> dict[str, Any]:
        for run in runs:
            if (run["hosts"], run["variant"], run["cameras"], run["delay_ms"], run["loss_percent"]) == (
                hosts, variant, cameras, delay, loss,
            ):  # fmt: skip
                return run
        return {}

    one, two, lossy = find(1, "node", 1), find(2, "node", 1), find(2, "node", 1, 20, 1)
    baseline_what = "the same stack on one host (shared memory, no wire), same run"
    headline = [
        figure("observation->chunk latency p50, policy node on the other host, 1 camera, 0 ms wire",
               two.get("latency_p50_ms"), "ms", baseline=one.get("latency_p50_ms"), baseline_what=baseline_what),
        figure("observation->chunk latency p50, 20 ms one way + 1 % loss, 1 camera", lossy.get("latency_p50_ms"),
               "ms", baseline=one.get("latency_p50_ms"), baseline_what=baseline_what,
               target="<= 500 ms (half the 1 s chunk: one inference worker keeps the executor fed)"),
        figure("executor starvation, 20 ms one way + 1 % loss, 1 camera", lossy.get("starvation_fraction"),
               "fraction of time", baseline=one.get("starvation_fraction"), baseline_what=baseline_what),
        figure("wire bandwidth robot->inference, 1 camera 640x480 JPEG at 30 fps", two.get("robot_to_inference_mbit_s"),
               "Mbit/s"),
    ]  # fmt: skip
    for variant, cameras in (("server", 1), ("node", 2), ("server", 2)):
        run, base = find(2, variant, cameras), find(1, variant, cameras)
        if run:
            headline.append(figure(
                f"observation->chunk latency p50, {'policy server' if variant == 'server' else 'policy node'} on the "
                f"other host, {cameras} camera(s), 0 ms wire", run.get("latency_p50_ms"), "ms",
                baseline=base.get("latency_p50_ms"), baseline_what=baseline_what,
            ))  # fmt: skip
    results = {
        "benchmark": "multihost",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
        "record_s": args.record,
        "runs": runs,
        "headline": headline,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(headline, indent=2))
    print(markdown_table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
