"""Keyboard control of the recorder, like `lerobot-record`'s keys, from a terminal (works over SSH).

Right arrow / n: save the episode now (or end the reset) -> `<recorder>/next_episode`
Left arrow / r: re-record the episode -> `<recorder>/rerecord_episode`
Esc / q: save and stop recording -> `<recorder>/stop_recording`

The terminal is put in cbreak mode while the node runs (no Enter needed) and restored on exit. No X display
is needed: keys are read from the terminal, not from a global keyboard hook.
"""

from __future__ import annotations

import os
import select
import sys
from dataclasses import dataclass
from typing import Any

from rclpy.executors import Executor
from rclpy.node import Node
from std_srvs.srv import Trigger

from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import StopRequest, run_node
from lerobot_ros.terminal_keys import HELP, SERVICES, Control, KeyDecoder, cbreak

ESC_TIMEOUT_S = 0.05


@dataclass(frozen=True)
class RecordKeyboardParameters:
    """The recorder keyboard's parameters (README: `python -m lerobot_ros.node_kit markdown <this>`)."""

    recorder: str = param("/recorder", "recorder node name")


class RecordKeyboard(Node):
    """Turns key presses into recorder service calls."""

    def __init__(self) -> None:
        super().__init__("record_keyboard")
        base = declare_parameters(self, RecordKeyboardParameters).config.recorder.rstrip("/")
        self._triggers = {c: self.create_client(Trigger, f"{base}/{name}") for c, name in SERVICES.items()}
        self._pending: list[Any] = []

    def send(self, control: Control) -> None:
        client = self._triggers[control]
        if not client.service_is_ready() and not client.wait_for_service(timeout_sec=5.0):
            self.get_logger().warning(f"{client.srv_name} is not available (is the recorder running?)")
            return
        future = client.call_async(Trigger.Request())
        future.add_done_callback(self._on_reply(control))
        self._pending.append(future)

    def _on_reply(self, control: Control) -> Any:
        def done(future: Any) -> None:
            reply = future.result()
            self.get_logger().info(f"{control.value}: {reply.message}")

        return done


def run(node: RecordKeyboard, fd: int, executor: Executor, stop: StopRequest) -> None:
    """Read keys from terminal `fd` (in cbreak mode) and spin `node` until stopped or the terminal closes."""
    keys = KeyDecoder()
    node.get_logger().info(f"keys: {HELP}")
    with cbreak(fd):
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], ESC_TIMEOUT_S)
            if ready:
                data = os.read(fd, 64)
                if not data:
                    return  # the terminal closed
                controls = keys.feed(data)
            else:
                controls = keys.flush()
            for control in controls:
                node.send(control)
            executor.spin_once(timeout_sec=0)


def main(args: list[str] | None = None) -> int:
    fd = sys.stdin.fileno()
    if not os.isatty(fd):
        sys.stderr.write("record_keyboard reads keys from a terminal; run it in one (ssh -t works)\n")
        return 2
    return run_node(
        RecordKeyboard,
        "record_keyboard",
        args=args,
        loop=lambda node, executor, stop: run(node, fd, executor, stop),
    )


if __name__ == "__main__":
    sys.exit(main())
