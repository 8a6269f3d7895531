"""`lerobot-ros launch` as a command: --print, --show-args, package lookup, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lerobot_ros.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["launch", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_print_shows_the_resolved_demo_talker(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--print", "lerobot_ros", "talker.launch.yaml", "namespace:=r1", "message:=hey there")
    assert code == 0
    assert "demo_talker-1: node /r1/talker (lerobot_ros/demo_talker) from talker.launch.yaml:" in out
    cmd_line = next(line for line in out.splitlines() if line.startswith("  cmd: "))
    assert cmd_line.split()[1] == str(Path(sys.prefix) / "lib" / "lerobot_ros" / "demo_talker")  # where ros2 run looks
    assert "--ros-args -r __node:=talker -r __ns:=/r1 --params-file" in cmd_line
    # One generated params file per inline param entry, as launch_ros writes them.
    assert "    /r1/talker:\n      ros__parameters:\n        message: hey there\n" in out
    assert "    /r1/talker:\n      ros__parameters:\n        rate_hz: 2.0\n" in out
    assert "# namespace = 'r1'" in out


def test_print_json_gives_the_resolution_with_typed_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--print-json", "lerobot_ros", "talker.launch.yaml", "namespace:=r1", "rate_hz:=5")
    assert code == 0
    (process,) = json.loads(out)["processes"]
    assert (process["label"], process["name"], process["namespace"]) == ("demo_talker-1", "talker", "/r1")
    assert process["parameters"][1] == {"generated": {"/r1/talker": {"rate_hz": {"type": "float", "value": 5.0}}}}
    assert process["cmd"][-2:] == ["--params-file", "<inline-params-1>"]


def test_print_shows_files_remaps_env_and_flags(
    capsys: pytest.CaptureFixture[str], write_launch, fake_prefix: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(fake_prefix))
    path = write_launch(
        """
        launch:
          - node:
              pkg: fakepkg
              exec: fake_node
              exec_name: worker
              param: [{from: $(find-pkg-share fakepkg)/config/params.yaml}]
              remap: [{from: a, to: b}]
              env: [{name: MODE, value: fast}]
              respawn: "true"
              respawn_delay: 1.5
              on_exit: shutdown
          - executable: {cmd: sleep 5, output: screen}
          - timer: {period: 2.0, children: [{executable: {cmd: sleep 1}}, {log: {message: late}}]}
        """
    )
    code, out, _ = _run(capsys, "--print", str(path))
    assert code == 0
    assert "worker-1: node /<default name> (fakepkg/fake_node)" in out
    assert f"  params file: {fake_prefix}/share/fakepkg/config/params.yaml" in out
    assert "  remap: a -> b" in out
    assert "  env: MODE=fast" in out
    assert "  output: log, respawn: after 1.5 s, unlimited times, on_exit: shutdown" in out
    assert "sleep-2: executable from test.launch.yaml:12" in out
    assert "  output: log, starts after 2 s (timer)" in out
    assert "log after 2 s: late" in out


def test_show_args(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--show-args", "lerobot_ros", "talker.launch.yaml")
    assert code == 0
    assert "    'namespace':\n        ROS namespace of the talker" in out
    assert "(default: 'demo')" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["lerobot_ros", "talker.launch.yaml", "namespace=r1"], "talker.launch.yaml:1: launch: command-line argument"),
        (["lerobot_ros", "talker.launch.yaml", "nmespace:=r1"], "'nmespace' is not declared by this launch file"),
        (["lerobot_ros", "missing.launch.yaml"], "missing.launch.yaml: no such launch file under"),
        (["no_such_dir/x.launch.yaml"], "no_such_dir/x.launch.yaml: no such launch file"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    code, out, err = _run(capsys, "--print", *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("lerobot-ros launch: error: ")
    assert expected in err


def test_real_process_exits_2_on_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.launch.yaml"
    path.write_text("launch:\n  - node: {pkg: lerobot_ros, exec: demo_talker}\n  - node: {pkg: lerobot_ros\n")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lerobot-ros"), "launch", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"lerobot-ros launch: error: {path}:3: YAML:")
    assert result.stderr.count("\n") == 1


def test_show_args_names_the_file_of_included_arguments(capsys: pytest.CaptureFixture[str], write_launch) -> None:
    child = write_launch("launch:\n  - arg: {name: depth, default: '3'}\n", "child.launch.yaml")
    path = write_launch("launch:\n  - include: {file: $(dirname)/child.launch.yaml}\n")
    code, out, _ = _run(capsys, "--show-args", str(path))
    assert code == 0
    assert f"    'depth':\n        no description given\n        (declared in {child})\n        (default: '3')" in out


def test_a_params_file_that_is_not_a_file_is_a_warning_not_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As with ros2 launch: the node starts without it; --print shows the warning, other runs print it on stderr."""
    launch_file = tmp_path / "talker.launch.yaml"
    launch_file.write_text(
        "launch:\n- node:\n    pkg: lerobot_ros\n    exec: demo_talker\n"
        "    param:\n    - {from: $(dirname)/none.yaml}\n"
    )
    warning = f"{launch_file}:6: node param: Parameter file path is not a file: {tmp_path / 'none.yaml'};"
    code, out, err = _run(capsys, "--print", str(launch_file))
    assert code == 0 and f"warning: {warning}" in out and "--params-file" not in out
    code, out, err = _run(capsys, "--print-json", str(launch_file))
    assert code == 0 and json.loads(out)["processes"][0]["parameters"] == []
    assert err.startswith(f"[WARNING] [launch]: {warning}") and len(err.strip().splitlines()) == 1
