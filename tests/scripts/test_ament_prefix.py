"""scripts/ament_prefix.py turns a prefix into an ament prefix: index marker, share links, lib/<pkg>/<exec>."""

from __future__ import annotations

import configparser
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = [
    *(p for p in sorted((REPO / "ros_ws" / "src").iterdir()) if (p / "setup.cfg").is_file()),
    REPO / "sim_bridge",
    REPO / "training",
    REPO / "policy_server",
]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ament_prefix", REPO / "scripts" / "ament_prefix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ament_prefix"] = module
    spec.loader.exec_module(module)
    return module


ament_prefix = load()


def console_scripts(source: Path) -> set[str]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(source / "setup.cfg")
    lines = cfg.get("options.entry_points", "console_scripts", fallback="").splitlines()
    return {line.split("=")[0].strip() for line in lines if line.strip()}


def make_package(root: Path, name: str, scripts: dict[str, str]) -> Path:
    src = root / name
    (src / "launch").mkdir(parents=True)
    (src / "package.xml").write_text(f"<package format='3'><name>{name}</name></package>")
    entries = "".join(f"\n    {k} = {v}" for k, v in scripts.items())
    (src / "setup.cfg").write_text(f"[options.entry_points]\nconsole_scripts ={entries}\n")
    return src


def test_every_ros_package_gets_its_executables_in_lib(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    plain = tmp_path / "plain_python"  # a Python project without package.xml
    plain.mkdir()
    (plain / "setup.cfg").write_text("[options.entry_points]\nconsole_scripts =\n    tool = json.tool:main\n")
    rc = ament_prefix.main([str(prefix), sys.executable, *map(str, PACKAGE_DIRS), str(plain)])
    assert rc == 0
    names = set()
    for source in PACKAGE_DIRS:
        package = ament_prefix.read_package(source)
        names.add(package.name)
        assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / package.name).is_file()
        assert (prefix / "share" / package.name / "package.xml").resolve() == source / "package.xml"
        lib = prefix / "lib" / package.name
        assert {p.name for p in lib.iterdir()} == console_scripts(source), package.name
        for exe in lib.iterdir():
            assert os.access(exe, os.X_OK), exe
    # The sim bridge, training and the policy server are ament packages like the others.
    assert {"lerobot_sim_bridge", "lerobot_training", "lerobot_policy_server"} <= names
    assert (prefix / "lib" / "lerobot_policy_server" / "lerobot-policy-server").is_file()
    assert {p.name for p in (prefix / "lib").iterdir()} == names  # nothing for the project without package.xml


def test_launcher_runs_the_entry_point_with_the_given_python(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    assert ament_prefix.main([str(prefix), sys.executable, str(REPO / "ros_ws" / "src" / "lerobot_ros")]) == 0
    result = subprocess.run(
        [str(prefix / "lib" / "lerobot_ros" / "lerobot-ros"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: lerobot-ros" in result.stdout


def test_rerun_is_idempotent_and_drops_stale_launchers(tmp_path: Path) -> None:
    src = make_package(tmp_path / "src", "pkg_a", {"one": "json.tool:main", "two": "json.tool:main"})
    prefix = tmp_path / "prefix"
    assert ament_prefix.main([str(prefix), sys.executable, str(src)]) == 0
    first = {p.name: p.stat().st_mtime_ns for p in (prefix / "lib" / "pkg_a").iterdir()}
    assert ament_prefix.main([str(prefix), sys.executable, str(src)]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in (prefix / "lib" / "pkg_a").iterdir()} == first  # untouched
    (src / "setup.cfg").write_text("[options.entry_points]\nconsole_scripts =\n    one = json.tool:main\n")
    foreign = prefix / "lib" / "pkg_a" / "user_tool"
    foreign.write_text("#!/bin/sh\n")
    assert ament_prefix.main([str(prefix), sys.executable, str(src)]) == 0
    assert {p.name for p in (prefix / "lib" / "pkg_a").iterdir()} == {"one", "user_tool"}  # ours gone, theirs kept
    assert (prefix / "share" / "pkg_a" / "launch").resolve() == src / "launch"


def test_a_file_it_did_not_write_is_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = make_package(tmp_path / "src", "pkg_b", {"tool": "json.tool:main"})
    lib = tmp_path / "prefix" / "lib" / "pkg_b"
    lib.mkdir(parents=True)
    (lib / "tool").write_text("#!/bin/sh\necho mine\n")
    assert ament_prefix.main([str(tmp_path / "prefix"), sys.executable, str(src)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "was not written by this tool" in err
    assert (lib / "tool").read_text() == "#!/bin/sh\necho mine\n"


def test_bad_console_script_line_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = make_package(tmp_path / "src", "pkg_c", {"tool": "no_colon_here"})
    assert ament_prefix.main([str(tmp_path / "prefix"), sys.executable, str(src)]) == 1
    err = capsys.readouterr().err
    assert "setup.cfg" in err and "no_colon_here" in err


def test_executables_only_leaves_an_installed_share_as_it_is(tmp_path: Path) -> None:
    """A non-editable install already put share/<pkg> (real files) into the prefix: only lib/<pkg> is written."""
    src = make_package(tmp_path / "src", "pkg_c", {"tool": "json.tool:main"})
    prefix = tmp_path / "prefix"
    installed = prefix / "share" / "pkg_c"
    (installed / "launch").mkdir(parents=True)
    (installed / "package.xml").write_text("installed")
    assert ament_prefix.main(["--executables-only", str(prefix), sys.executable, str(src)]) == 0
    assert (prefix / "lib" / "pkg_c" / "tool").is_file()
    assert not (installed / "package.xml").is_symlink() and (installed / "package.xml").read_text() == "installed"
    assert not (installed / "launch").is_symlink()
    # Without the flag the same prefix is refused (a real file where a link would go), as before.
    assert ament_prefix.main([str(prefix), sys.executable, str(src)]) == 1
