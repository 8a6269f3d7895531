"""A policy server behind a 5 Mbit/s link: raw camera images starve the executor, JPEG ones do not (same run).

The inference host serves a numpy policy (tests/policy_server/fake_policy_server.py: no model time, so what is
measured is the link) taking the state and one 240x320 camera, 15-step chunks at 30 fps (0.5 s). Both hosts
send through a 5 Mbit/s token bucket (tbf). On the robot host, `link_client.py` runs the policy node's cores
(`RemotePolicy`, the scheduler, the executor's starvation accounting, the bottleneck advice) for 4 s from the
first chunk, once with raw images and once with JPEG (quality 90).

Raw: 230 kB per request is >= 0.37 s on the wire, so one request per chunk cannot arrive before a 0.5 s chunk
ends (a single worker keeps a chunk fed only while a call takes less than half of it) and the advice names the
link and image_encoding:=jpeg, not more workers. JPEG: ~14 kB, within the bucket's 16 kB burst, a few ms on the
wire: starvation <= 5 % of the time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from harness import Link, two_hosts, unavailable

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
FAKE_SERVER = REPO / "tests" / "policy_server" / "fake_policy_server.py"
CLIENT = Path(__file__).resolve().parent / "link_client.py"
PORT = 50857
RATE_MBIT_S = 5.0


def client_result(process) -> dict:
    lines = [line for line in process.output().splitlines() if line.startswith("RESULT ")]
    assert lines, process.output()[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_jpeg_images_keep_the_executor_fed_where_raw_ones_starve_it(processes, tmp_path):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    results = {}
    with two_hosts(tmp_path / "hosts") as hosts:
        wire = processes.start(hosts.wire_command(Link(), tmp_path / "wire.json"), name="wire")
        wire.wait_for_output("wire up", timeout=30)
        for host in ("robot", "inference"):
            hosts.limit_rate(host, RATE_MBIT_S)
        server = processes.start(
            hosts.command("inference", [sys.executable, str(FAKE_SERVER), "--port", str(PORT), "--host", "0.0.0.0",
                                        "--camera", "240x320", "--horizon", "15", "--fps", "30"]),
            name="server",
        )  # fmt: skip
        server.wait_for_output(f"serving on {PORT}", timeout=60)
        url = f"grpc://{hosts.address['inference']}:{PORT}"
        for encoding in ("raw", "jpeg"):
            argv = [sys.executable, str(CLIENT), "--url", url, "--encoding", encoding, "--duration", "4"]
            client = processes.start(hosts.command("robot", argv), name=f"client_{encoding}")
            assert client.wait(timeout=120) == 0, client.output()[-3000:]
            results[encoding] = client_result(client)
        processes.stop_all()
    raw, jpeg = results["raw"], results["jpeg"]
    print(json.dumps(results, indent=1))
    assert raw["request_bytes"] > 230_000 and jpeg["request_bytes"] < 23_000
    assert raw["link_mbit_s"] < RATE_MBIT_S * 1.1  # the bucket holds: the wire, not the model, took the time
    assert raw["starvation_fraction"] > 0.2, raw
    assert raw["bottleneck"] == "link" and "set image_encoding:=jpeg" in raw["advice"], raw
    assert "raise inference_workers" not in raw["advice"]
    assert jpeg["starvation_fraction"] <= 0.05, jpeg
    assert not raw["errors"] and not jpeg["errors"]
