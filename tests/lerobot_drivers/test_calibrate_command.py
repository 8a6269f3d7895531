"""`lerobot-ros calibrate` run non-interactively against the fake bus while a "hand" moves the joints."""

from __future__ import annotations

import argparse
import json
import threading
import time
from importlib.metadata import entry_points

import pytest

from lerobot_drivers.arms import get_arm
from lerobot_drivers.calibrate_command import COMMAND, default_calibration_path
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import load_calibration
from lerobot_ros.command import CommandError

START = {
    "shoulder_pan": 1500,
    "shoulder_lift": 2600,
    "elbow_flex": 1900,
    "wrist_flex": 2100,
    "wrist_roll": 3000,
    "gripper": 2300,
}
SWEEP = (-600, 700)  # how far the hand moves each recorded joint around the middle pose


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    return COMMAND.run(parser.parse_args(argv))


def _hand(fake, spec, done: threading.Event) -> None:
    """Wait for the homing offsets, then sweep every recorded joint."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(fake.servo(j.motor_id).get("Homing_Offset") for j in spec.joints):
        time.sleep(0.01)
    for delta in SWEEP:
        with fake.lock:
            for joint in spec.joints:
                if not joint.full_turn:
                    fake.servo(joint.motor_id).move_by_hand(2047 + delta)
        time.sleep(0.3)
    done.set()


def test_command_is_registered():
    names = {ep.name: ep.value for ep in entry_points(group="lerobot_ros.commands")}
    assert names.get("calibrate") == "lerobot_drivers.calibrate_command:COMMAND"


@pytest.mark.parametrize("robot", ["so101_follower", "koch_leader"])
def test_calibration_writes_lerobot_file_and_motors(tmp_path, robot, capsys):
    spec = get_arm(robot)
    fake = fake_arm_bus(spec, None, positions=START)
    output = tmp_path / "cal.json"
    with PtyServoBus(fake) as pty:
        done = threading.Event()
        hand = threading.Thread(target=_hand, args=(fake, spec, done), daemon=True)
        hand.start()
        argv = ["--robot", robot, "--port", pty.port, "--output", str(output), "--yes", "--record-seconds", "1.2"]
        assert _run(argv) == 0
        assert done.is_set()
    calibration = load_calibration(output)
    assert list(calibration) == list(spec.joint_names)
    for joint in spec.joints:
        cal = calibration[joint.name]
        physical = START[joint.name]
        expected_homing = physical - 2047 if spec.family == "feetech" else 2047 - physical
        assert cal.id == joint.motor_id
        assert cal.homing_offset == expected_homing
        assert (cal.range_min, cal.range_max) == ((0, 4095) if joint.full_turn else (2047 + SWEEP[0], 2047 + SWEEP[1]))
        assert cal.drive_mode == spec.drive_modes.get(joint.name, 0)
        servo = fake.servo(joint.motor_id)
        assert (servo.get("Homing_Offset"), servo.get("Min_Position_Limit"), servo.get("Max_Position_Limit")) == (
            cal.homing_offset, cal.range_min, cal.range_max,
        )  # fmt: skip
    printed = capsys.readouterr().out
    assert json.loads(output.read_text()) == json.loads(
        printed[printed.index("{\n") : printed.index("Calibration saved")]
    )


def test_joint_that_never_moves_is_an_error(tmp_path):
    spec = get_arm("so101_follower")
    fake = fake_arm_bus(spec, None, positions=START)
    with PtyServoBus(fake) as pty, pytest.raises(CommandError, match="did not move while recording"):
        _run(
            [
                "--robot",
                "so101_follower",
                "--port",
                pty.port,
                "--output",
                str(tmp_path / "c.json"),
                "--yes",
                "--record-seconds",
                "0.2",
            ]
        )
    assert not (tmp_path / "c.json").exists()


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(CommandError, match="unknown robot type 'so102_follower'"):
        _run(["--robot", "so102_follower", "--port", "/dev/null", "--yes", "--record-seconds", "1"])
    with pytest.raises(CommandError, match="cannot open /dev/nonexistent"):
        _run(
            [
                "--robot",
                "so101_follower",
                "--port",
                "/dev/nonexistent",
                "--output",
                str(tmp_path / "x.json"),
                "--yes",
                "--record-seconds",
                "1",
            ]
        )
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    with pytest.raises(CommandError, match="exists; pass --overwrite"):
        _run(
            [
                "--robot",
                "so101_follower",
                "--port",
                "/dev/null",
                "--output",
                str(existing),
                "--yes",
                "--record-seconds",
                "1",
            ]
        )


def test_default_location_is_lerobots(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path))
    monkeypatch.delenv("HF_LEROBOT_CALIBRATION", raising=False)
    assert (
        default_calibration_path("robots", "so101_follower", "arm1")
        == tmp_path / "calibration/robots/so101_follower/arm1.json"
    )


def test_contract_units_are_printed_from_a_calibration(tmp_path, capsys):
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.motors.calibration import save_calibration

    path = tmp_path / "cal.json"
    save_calibration(path, default_fake_calibration(get_arm("so101_follower")))
    assert _run(["--robot", "so101_follower", "--contract-units", str(path)]) == 0
    out = capsys.readouterr().out
    assert "so101_gripper_range_0_100: {kind: range, in: [-1.571180, 1.571180], out: [0, 100]}" in out
    assert "lerobot_so101: {kind: per_joint, default: rad_to_deg, joints: {gripper: so101_gripper_range_0_100}}" in out


def test_interactive_procedure_waits_for_enter_at_each_step(tmp_path):
    """The interactive flow on a terminal: ENTER at the middle pose, a live table, ENTER to stop."""
    import os
    import pty
    import subprocess
    import sys

    spec = get_arm("so101_follower")
    fake = fake_arm_bus(spec, None, positions=START)
    output = tmp_path / "cal.json"
    script = (
        "import argparse, sys\n"
        "from lerobot_drivers.calibrate_command import COMMAND\n"
        "p = argparse.ArgumentParser(); COMMAND.add_arguments(p)\n"
        "sys.exit(COMMAND.run(p.parse_args(sys.argv[1:])))\n"
    )
    with PtyServoBus(fake) as bus_pty:
        master, slave = pty.openpty()
        argv = ["--robot", "so101_follower", "--port", bus_pty.port, "--output", str(output)]
        proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        seen = bytearray()

        def read_until(marker: bytes, timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while marker not in seen:
                assert time.monotonic() < deadline, f"{marker!r} not printed; output: {seen.decode(errors='replace')}"
                try:
                    seen.extend(os.read(master, 4096))
                except OSError:
                    time.sleep(0.05)

        try:
            read_until(b"middle of its range of motion")
            assert all(fake.servo(i).get("Homing_Offset") == 0 for i in range(1, 7))  # waits for ENTER
            os.write(master, b"\n")
            read_until(b"Press ENTER to stop")
            done = threading.Event()
            _hand(fake, spec, done)
            read_until(b"shoulder_pan")
            os.write(master, b"\n")
            read_until(b"Calibration saved")
            assert proc.wait(20) == 0
        finally:
            proc.kill()
            os.close(master)
    calibration = load_calibration(output)
    assert calibration["elbow_flex"].range_min == 2047 + SWEEP[0]
    assert calibration["wrist_roll"].range_max == 4095
