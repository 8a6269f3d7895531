"""LeRobot's lerobot-record through the ROS robot plugin against the project's recorder, on one stack at once.

The stack: the fake-hardware SO-101 follower (its arm driver and action executor, lerobot_drivers'
so101_follower.launch.yaml) and the synthetic streams node publishing one camera and a leader arm's joint states
(/leader/joint_states, smooth trajectories). On that stack, at the same time:

* LeRobot 0.4.4's `lerobot-record` (its own venv, .venv-lerobot-ref) with `--robot.type=ros` (the follower's
  joint states and the camera, aligned by the project's rule) and `--teleop.type=ros` (the leader topic), which
  also sends the leader's pose to the follower;
* the project's `recorder` node on the same topics (the leader topic as `action`): the same-run baseline.

Both record N episodes of the same length with the same reset time, both encoding the camera as h264 video.
Reported per recorder: frames written per episode against episode length x fps (the step rate achieved against
the fps asked), frames missing, and the CPU (% of one core) and peak RSS of its process; the recorder also
reports its own dropped-frame counters (stale / sync / writer overrun, from /diagnostics). lerobot-record has no
such counters: its loop steps at most at the fps, and a slow step shows only as missing frames.

With `--busy N`, N busy-loop processes (bench/load.py) run while both record (from the moment both have started
their first episode until its end): the busy host of issue #36. lerobot-record's plugin reports, at disconnect, how
old each camera image was when LeRobot's loop read it (p50 / p99, the share older than the contract's `max_age_s`)
and its alignment's counters; the recorder's counters are its /diagnostics'. `--plugin-path DIR` puts DIR first on
lerobot-record's PYTHONPATH (a checkout of `lerobot_plugins/lerobot_robot_ros` from another commit: before/after
comparisons on one machine); `--streaming-encoding` gives LeRobot >= 0.6 `--dataset.streaming_encoding=true`.
`--teleoperate S` then runs `lerobot-teleoperate` (default timeouts, 60 Hz) on the same stack for S s under the same
busy loops and reports whether it was still running at the end (else its error line) and the plugin's line.

Writes bench/results/lerobot_record.json (lerobot_record_quick.json with --quick; `--tag T` adds `_T`).

Usage: python bench/bench_lerobot_record.py [--quick] [--episodes N] [--episode-time S] [--reset-time S]
       [--width W --height H] [--cameras 1|2] [--busy N] [--plugin-path DIR] [--streaming-encoding] [--tag T]
       [--teleoperate S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from bench_recorder import ProcessMeter, watch_diagnostics
from headline import figure
from load import busy_loops

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FPS = 30
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
# The plugin's line at disconnect (lerobot_robot_ros.core.ContractRobot.summary).
PLUGIN_SUMMARY = re.compile(
    r"(?P<count>\d+) camera images (?P<p50>\d+) / (?P<p99>\d+) ms old when read \(p50 / p99\), "
    r"(?P<over>[\d.]+) % older than max_age_s (?P<limit>[\d.]+) s; frames kept (?P<kept>\d+), dropped "
    r"(?P<stale>\d+) stale and (?P<sync>\d+) out of sync_tolerance_s, (?P<late>\d+) samples late"
)


def contracts(width: int, height: int, cameras: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what lerobot-record and the recorder read, what the synthetic streams publish).

    The recorder's contract records the leader topic as `action`; lerobot-record's action is what its teleoperator
    reads from that topic, so both datasets hold the same features. Cameras: front, then wrist.
    """
    base = yaml.safe_load((ROOT / "config" / "contracts" / "so101.yaml").read_text())
    state = base["features"]["observation.state"]
    action = dict(state, topic="/leader/joint_states")
    images = {
        f"observation.images.{name}": dict(base["features"][f"observation.images.{name}"], shape=[height, width, 3])
        for name in ("front", "wrist")[:cameras]
    }
    record = dict(base, features={"observation.state": state, "action": action, **images})
    streams = dict(base, features={"action": action, **images})
    return record, streams


def lerobot_version() -> str:
    from lerobot_ros.testing import reference_venv

    python = reference_venv() / "bin" / "python"
    return subprocess.run(
        [str(python), "-c", "import lerobot; print(lerobot.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()


def plugin_summary(log: str) -> dict[str, Any]:
    """The plugin's image ages and alignment counters from lerobot-record's log ({} when it did not log them)."""
    match = PLUGIN_SUMMARY.search(log)
    if match is None:
        return {}
    g = {k: float(v) for k, v in match.groupdict().items()}
    return {
        "images_read": int(g["count"]),
        "image_age_p50_ms": g["p50"],
        "image_age_p99_ms": g["p99"],
        "image_share_older_than_max_age": round(g["over"] / 100, 4),
        "max_age_s": g["limit"],
        "frames_kept": int(g["kept"]),
        "frames_dropped_stale": int(g["stale"]),
        "frames_dropped_sync": int(g["sync"]),
        "late_samples": int(g["late"]),
    }


def teleoperate(args: argparse.Namespace, command: list[str], start: Any, log: Path) -> dict[str, Any]:
    """lerobot-teleoperate (its default timeouts) for `args.teleoperate` s under `args.busy` busy loops: whether it
    was still running at the end, its error line if not, and the plugin's line at disconnect."""
    process = start("lerobot_teleoperate", command)
    deadline = time.monotonic() + 180
    while process.poll() is None and time.monotonic() < deadline:
        if log.is_file() and " connected to " in log.read_text(errors="replace"):
            break
        time.sleep(0.5)
    began = time.monotonic()
    with busy_loops(args.busy):
        while process.poll() is None and time.monotonic() < began + args.teleoperate:
            time.sleep(0.5)
        ran = time.monotonic() - began
    survived = process.poll() is None
    if survived:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    text = log.read_text(errors="replace")
    errors = [line for line in text.splitlines() if "Error" in line and "Traceback" not in line]
    return {
        "seconds_asked": args.teleoperate,
        "busy_loops": args.busy,
        "survived": survived,
        "ran_s": round(ran, 1),
        "error": errors[-1][-400:] if errors and not survived else None,
        **plugin_summary(text),
    }


def started_recording(log: Path, samples: list[dict[str, str]]) -> bool:
    """Both have begun their first episode: lerobot-record said so, the recorder reports `recording`."""
    said = log.is_file() and "Recording episode" in log.read_text(errors="replace")
    return said and any(s.get("state") == "recording" for s in samples)


def fake_follower(work: Path) -> list[str]:
    """The fake-hardware follower's launch command, with a default calibration written under `work`."""
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.motors.calibration import save_calibration
    from lerobot_ros.testing import venv_script

    calibration = work / "follower.json"
    save_calibration(calibration, default_fake_calibration(get_arm("so101_follower")))
    return [venv_script("lerobot-ros"), "launch", "--log-dir", str(work / "arm_logs"), "lerobot_drivers",
            "so101_follower.launch.yaml", "fake_hardware:=true", f"fake_dir:={work}",
            f"calibration:={calibration}"]  # fmt: skip


def episode_frames(root: Path) -> list[int]:
    """Frames per episode of the LeRobot v3 dataset at `root` (from its data files)."""
    import pyarrow.parquet as pq

    counts: dict[int, int] = {}
    for path in sorted((root / "data").rglob("*.parquet")):
        for episode in pq.read_table(path, columns=["episode_index"]).column("episode_index").to_pylist():
            counts[int(episode)] = counts.get(int(episode), 0) + 1
    return [counts[k] for k in sorted(counts)]


def summary(frames: list[int], episodes: int, episode_time_s: float) -> dict[str, Any]:
    expected = round(episode_time_s * FPS)
    written = sum(frames)
    return {
        "episodes_written": len(frames),
        "frames_per_episode": frames,
        "frames_expected_per_episode": expected,
        "frames_missing": max(0, episodes * expected - written),
        "step_rate_hz": round(written / (len(frames) * episode_time_s), 2) if frames else None,
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from lerobot_ros.dds import ros_environment
    from lerobot_ros.testing import lease_domain, reference_env, reference_venv, venv_script

    if not (reference_venv() / ".plugins-stamp").is_file():
        raise SystemExit(f"needs the LeRobot plugins in {reference_venv()}: scripts/setup.sh --with-lerobot-plugins")
    lease = lease_domain()
    os.environ.update(ros_environment())
    os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env = dict(os.environ)
    record_contract, streams_contract = contracts(args.width, args.height, args.cameras)
    record_path, streams_path = work / "record.yaml", work / "streams.yaml"
    record_path.write_text(yaml.safe_dump(record_contract, sort_keys=False))
    streams_path.write_text(yaml.safe_dump(streams_contract, sort_keys=False))
    logs = work / "logs"
    logs.mkdir()

    def start(name: str, command: list[str], environ: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, env=environ, stdout=(logs / f"{name}.log").open("w"), stderr=subprocess.STDOUT)

    stack = [
        start("follower", fake_follower(work), env),
        start("streams", [venv_script("synthetic_streams"), "--ros-args", "-p", f"contract:={streams_path}"], env),
    ]
    episode_args = {"num_episodes": args.episodes, "episode_time_s": args.episode_time, "reset_time_s": args.reset_time}
    samples: list[dict[str, str]] = []
    loaded: dict[str, Any] = {"busy_loops": args.busy}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_diagnostics, args=(stop, samples), daemon=True)
    lerobot_env = reference_env(work)
    lerobot_env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # the LeRobot venv's own ROS wheels set themselves up
    if args.plugin_path:
        lerobot_env["PYTHONPATH"] = os.pathsep.join(p for p in (args.plugin_path, lerobot_env.get("PYTHONPATH")) if p)
    version = lerobot_version()
    codec = "--dataset.vcodec=h264" if version.startswith("0.4") else "--dataset.rgb_encoder.vcodec=h264"
    extra = ["--dataset.streaming_encoding=true"] if args.streaming_encoding else []
    try:
        recorder = start("recorder", [venv_script("recorder"), "--ros-args",
            "-p", f"contract:={record_path}", "-p", f"root:={work / 'recorder_dataset'}", "-p", "task:=bench",
            *[a for k, v in episode_args.items() for a in ("-p", f"{k}:={float(v) if k != 'num_episodes' else v}")],
            "-p", "video_codec:=h264", "-p", "shutdown_when_done:=true", "-p", "min_free_mb:=50.0",
            "-p", "startup_timeout_s:=120.0"], env)  # fmt: skip
        lerobot = start("lerobot_record", [str(reference_venv() / "bin" / "lerobot-record"),
            "--robot.type=ros", f"--robot.contract={record_path}", "--robot.connect_timeout_s=120",
            "--teleop.type=ros", f"--teleop.contract={record_path}", "--teleop.topic=/leader/joint_states",
            "--teleop.connect_timeout_s=120", "--dataset.repo_id=local/bench",
            f"--dataset.root={work / 'lerobot_dataset'}",
            "--dataset.single_task=bench", f"--dataset.num_episodes={args.episodes}",
            f"--dataset.episode_time_s={args.episode_time}", f"--dataset.reset_time_s={args.reset_time}",
            codec, *extra, "--dataset.push_to_hub=false", "--display_data=false", "--play_sounds=false"],
            lerobot_env)  # fmt: skip
        watcher.start()
        meters = {"recorder": ProcessMeter(recorder.pid), "lerobot_record": ProcessMeter(lerobot.pid)}
        limit = time.monotonic() + 300 + args.episodes * (args.episode_time + args.reset_time) * 3
        load = contextlib.ExitStack()
        load_end: float | None = None
        with load:
            while any(p.poll() is None for p in (recorder, lerobot)):
                time.sleep(0.5)
                for meter in meters.values():
                    meter.sample()
                if args.busy and load_end is None and started_recording(logs / "lerobot_record.log", samples):
                    load.enter_context(busy_loops(args.busy))  # the first episode of both, loaded
                    load_end = time.monotonic() + args.episode_time
                    loaded_from = time.monotonic()
                if load_end is not None and time.monotonic() > load_end:
                    load.close()
                    load_average = os.getloadavg()[0]
                    load_end = float("inf")
                    loaded["seconds"] = round(time.monotonic() - loaded_from, 1)
                    loaded["load_average_1min_at_end"] = load_average
                if time.monotonic() > limit:
                    for process in (recorder, lerobot):
                        if process.poll() is None:
                            process.terminate()
                    break
        for process in (recorder, lerobot):
            process.wait(60)
        if args.teleoperate:
            command = [str(reference_venv() / "bin" / "lerobot-teleoperate"),
                "--robot.type=ros", f"--robot.contract={record_path}", "--robot.connect_timeout_s=120",
                "--teleop.type=ros", f"--teleop.contract={record_path}", "--teleop.topic=/leader/joint_states",
                "--teleop.connect_timeout_s=120", "--display_data=false"]  # fmt: skip
            teleoperated = teleoperate(
                args, command, lambda name, argv: start(name, argv, lerobot_env), logs / "lerobot_teleoperate.log"
            )
    finally:
        stop.set()
        for process in stack:
            process.terminate()
        for process in stack:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        lease.release()
    recording = [s for s in samples if s.get("state") == "recording"]
    last = recording[-1] if recording else {}
    out: dict[str, Any] = {}
    for name, process, root in (("lerobot_record", lerobot, work / "lerobot_dataset"),
                                ("recorder", recorder, work / "recorder_dataset")):  # fmt: skip
        frames = episode_frames(root) if (root / "data").is_dir() else []
        text = (logs / f"{name}.log").read_text(errors="replace")
        out[name] = {
            **summary(frames, args.episodes, args.episode_time),
            **meters[name].report(),
            "exit": process.returncode,
            "log_tail": text.splitlines()[-3:],
        }
    out["lerobot_record"].update(plugin_summary((logs / "lerobot_record.log").read_text(errors="replace")))
    out["lerobot_record"]["lerobot_version"] = version
    out["load"] = loaded
    if args.teleoperate:
        out["lerobot_teleoperate"] = teleoperated
    # The recorder's own counters at its last /diagnostics report while recording.
    counters = ("dropped", "dropped_stale", "dropped_sync", "dropped_overrun", "late_samples")
    out["recorder"]["diagnostics"] = {k: int(last[k]) for k in counters if k in last}
    return out


def headline(args: argparse.Namespace, live: dict[str, Any]) -> list[dict[str, Any]]:
    """Step rate and cost of lerobot-record through the plugin, the project's recorder in the same run the baseline."""
    lerobot, recorder = live["lerobot_record"], live["recorder"]
    cameras = f"{args.cameras} camera{'s' if args.cameras > 1 else ''}"
    busy = f", {args.busy} busy loops" if args.busy else ""
    where = f"{args.episodes} x {args.episode_time:g} s, {cameras} {args.width}x{args.height}, h264{busy}"
    baseline = "the project's recorder node, same stack, same run"
    ages = []
    if "image_age_p50_ms" in lerobot:
        ages = [
            figure(f"lerobot-record image age when read, p50, {where}", lerobot["image_age_p50_ms"], "ms"),
            figure(f"lerobot-record image age when read, p99, {where}", lerobot["image_age_p99_ms"], "ms"),
            figure(f"lerobot-record images older than max_age_s {lerobot['max_age_s']:g} s, {where}",
                   100 * lerobot["image_share_older_than_max_age"], "%", target="<= 1 (the contract's freshness)"),
        ]  # fmt: skip
    return [
        *ages,
        figure(f"lerobot-record step rate, {where}", lerobot["step_rate_hz"], "frames/s",
               baseline=recorder["step_rate_hz"], baseline_what=baseline,
               target=f">= {FPS * 0.95:g} (95% of the {FPS} fps asked)"),
        figure(f"lerobot-record frames missing, {where}", lerobot["frames_missing"], "frames",
               baseline=recorder["frames_missing"], baseline_what=baseline),
        figure(f"lerobot-record CPU, {where}", lerobot["cpu_percent_of_one_core"], "% of one core",
               baseline=recorder["cpu_percent_of_one_core"], baseline_what=baseline),
        figure(f"lerobot-record peak RSS, {where}", lerobot["peak_rss_mb"], "MB", baseline=recorder["peak_rss_mb"],
               baseline_what=baseline),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 episodes of 8 s, 2 s reset")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--episode-time", type=float, default=30.0, help="episode length (s), default 30")
    parser.add_argument("--reset-time", type=float, default=5.0, help="pause between episodes (s), default 5")
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--cameras", type=int, choices=(1, 2), default=1, help="front, and wrist with 2")
    parser.add_argument("--busy", type=int, default=0, help="busy loops while both record their first episode")
    parser.add_argument("--plugin-path", default="", help="put this first on lerobot-record's PYTHONPATH")
    parser.add_argument("--streaming-encoding", action="store_true", help="LeRobot >= 0.6: encode while recording")
    parser.add_argument("--tag", default="", help="suffix of the results file")
    parser.add_argument("--teleoperate", type=float, default=0.0, help="then lerobot-teleoperate this long (s)")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.episode_time, args.reset_time = 2, 8.0, 2.0
    work = Path(tempfile.mkdtemp(prefix="bench_lerobot_record_"))
    try:
        live = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "headline": headline(args, live),
        "load": f"fake-hardware SO-101 follower + {args.cameras} synthetic camera(s) {args.width}x{args.height} @ 30 "
        f"fps + leader joint states @ 100 Hz; {args.episodes} episodes of {args.episode_time:g} s, "
        f"{args.reset_time:g} s reset; {args.busy} busy loops during the first episode",
        "machine": f"{os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f}",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], check=False, cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "plugin_path": args.plugin_path or None,
        "streaming_encoding": args.streaming_encoding,
        "live": live,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "lerobot_record_quick" if args.quick else "lerobot_record"
    out = RESULTS / f"{name}{'_' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
