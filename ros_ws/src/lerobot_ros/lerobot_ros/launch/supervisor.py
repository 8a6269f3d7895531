"""Running the processes of a launch plan: output, respawn, shutdown.

Each process runs in its own session (so its own process group): a Ctrl-C in the terminal reaches
only the launcher, which then stops the children in order, the way `ros2 launch` does: SIGINT to
each process group, SIGTERM after `sigterm_timeout`, SIGKILL after a further `sigkill_timeout`. A launcher
that cannot do that (SIGKILLed) still takes its children down: each gets SIGTERM as its parent-death signal.
Output lines are printed as `[label] line` (stdout and stderr for `output: screen`/`both`/`full`, only
stderr for `log`, nothing for `own_log`) and written to `<log_dir>/<label>.log`.

`run()` returns 0 after a clean shutdown (Ctrl-C, SIGTERM, SIGHUP, or every process done) and 1 when a
required process (`on_exit: shutdown`) exited with a non-zero status.
"""

from __future__ import annotations

import os
import pty
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, TextIO

import yaml

from lerobot_ros.launch.description import InlineParameters, LogMessage, ProcessDescription, ShutdownRequest
from lerobot_ros.parent_death import parent_death_signal

DEFAULT_SIGTERM_TIMEOUT = 5.0
DEFAULT_SIGKILL_TIMEOUT = 5.0
EXIT_REQUIRED_PROCESS_FAILED = 1


@dataclass
class _Running:
    description: ProcessDescription
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log: IO[str]
    log_lock: threading.Lock
    readers: list[threading.Thread]
    stop_started: float | None = None
    sent: list[signal.Signals] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass(frozen=True)
class _Exited:
    running: _Running


@dataclass(frozen=True)
class _Signalled:
    signum: int


class ProcessSupervisor:
    """Starts `processes`, relays their output, respawns them, and stops them all on shutdown."""

    def __init__(
        self,
        processes: Sequence[ProcessDescription],
        *,
        base_env: Mapping[str, str],
        log_dir: Path,
        out: TextIO,
        sigterm_timeout: float = DEFAULT_SIGTERM_TIMEOUT,
        sigkill_timeout: float = DEFAULT_SIGKILL_TIMEOUT,
        poll_interval: float = 0.05,
        messages: Sequence[LogMessage] = (),
        shutdown_request: ShutdownRequest | None = None,
    ) -> None:
        self.processes = list(processes)
        self.messages = list(messages)
        self.shutdown_request = shutdown_request
        self._scheduled: list[tuple[float, int, ProcessDescription | LogMessage | ShutdownRequest]] = []
        self.base_env = dict(base_env)
        self.log_dir = log_dir
        self.params_dir = log_dir / "params"
        self.out = out
        self.sigterm_timeout = sigterm_timeout
        self.sigkill_timeout = sigkill_timeout
        self.poll_interval = poll_interval
        self._events: queue.SimpleQueue[_Exited | _Signalled] = queue.SimpleQueue()
        self._out_lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._groups: set[int] = set()
        self._respawn_due: list[tuple[float, ProcessDescription]] = []
        self._respawn_counts: dict[str, int] = {}
        self._shutting_down = False
        self._signal_pending = False
        self._screen_open = True
        self._exit_code = 0

    def say(self, source: str, message: str, level: str = "INFO") -> None:
        """Print a launcher message in ros2 launch's style: `[LEVEL] [source]: message`."""
        self._write(f"[{level}] [{source}]: {message}")

    def _write(self, line: str) -> None:
        with self._out_lock:
            if not self._screen_open:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (BrokenPipeError, ValueError):
                # The reader of our output went away (e.g. `| head`): keep running, keep logging to files.
                self._screen_open = False

    def _relay(self, running: _Running, stream: IO[bytes], to_screen: bool) -> None:
        label = running.description.label
        try:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if to_screen:
                    self._write(f"[{label}] {line}")
                with running.log_lock:
                    if not running.log.closed:
                        running.log.write(line + "\n")
                        running.log.flush()
        except OSError:
            pass  # a pseudo-terminal (emulate_tty) reads EIO once the process closed its side: end of output
        stream.close()

    def _wait(self, running: _Running) -> None:
        running.popen.wait()
        for reader in running.readers:
            # A grandchild may keep the pipe open after the process exited; do not wait for it forever.
            reader.join(timeout=1.0)
        self._events.put(_Exited(running))

    def write_params_files(self, description: ProcessDescription) -> None:
        if description.node is None:
            return
        for path, block in description.inline_params_files(self.params_dir):
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(block, InlineParameters):
                path.write_text(yaml.safe_dump(block.params_file_content(description.node.params_key), sort_keys=False))
            else:
                path.write_text(block.substituted or "")  # a `from` file with allow_substs, substituted

    def start(self, description: ProcessDescription) -> _Running | None:
        """Start one process; a failure to start is reported and counts as a failed exit."""
        self.write_params_files(description)
        argv = description.argv(self.params_dir)
        env = {k: v for k, v in self.base_env.items() if k not in description.unset_env}
        env = {**env, "PYTHONUNBUFFERED": "1", **description.additional_env}
        # emulate_tty: stdout and stderr are pseudo-terminals (as launch does), so programs line-buffer and colour.
        terminals = [pty.openpty(), pty.openpty()] if description.emulate_tty else []
        try:
            popen = subprocess.Popen(
                argv,
                env=env,
                cwd=description.cwd,
                stdin=subprocess.DEVNULL,
                stdout=terminals[0][1] if terminals else subprocess.PIPE,
                stderr=terminals[1][1] if terminals else subprocess.PIPE,
                start_new_session=True,
                preexec_fn=parent_death_signal(signal.SIGTERM),  # noqa: PLW1509 - one prctl call in the child
            )
        except OSError as err:
            for master, slave in terminals:
                os.close(master)
                os.close(slave)
            self.say(description.label, f"failed to start {shlex.join(argv)}: {err.strerror or err}", "ERROR")
            if description.required:
                self._exit_code = EXIT_REQUIRED_PROCESS_FAILED
                self.shutdown(f"required process {description.label} could not start")
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{description.label}.log", "a")  # noqa: SIM115 - closed when the process exits
        running = _Running(description, argv, popen, log, threading.Lock(), [])
        if terminals:
            for _, slave in terminals:
                os.close(slave)
            streams: tuple[IO[bytes], IO[bytes]] = (
                os.fdopen(terminals[0][0], "rb", buffering=0),
                os.fdopen(terminals[1][0], "rb", buffering=0),
            )
        else:
            assert popen.stdout is not None and popen.stderr is not None
            streams = (popen.stdout, popen.stderr)
        to_screen_stdout = description.output in ("screen", "both", "full")
        to_screen_stderr = description.output != "own_log"
        for stream, to_screen in ((streams[0], to_screen_stdout), (streams[1], to_screen_stderr)):
            reader = threading.Thread(target=self._relay, args=(running, stream, to_screen), daemon=True)
            running.readers.append(reader)
            reader.start()
        self._running[popen.pid] = running
        self._groups.add(popen.pid)
        threading.Thread(target=self._wait, args=(running,), name=f"wait-{description.label}", daemon=True).start()
        self.say(description.label, f"process started with pid [{popen.pid}]")
        return running

    def _on_exit(self, running: _Running) -> None:
        self._running.pop(running.pid, None)
        with running.log_lock:
            running.log.close()
        description = running.description
        code = running.popen.returncode
        if code == 0:
            self.say(description.label, f"process has finished cleanly [pid {running.pid}]")
        else:
            level = "INFO" if self._shutting_down else "ERROR"
            self.say(
                description.label,
                f"process has died [pid {running.pid}, exit code {code}, cmd '{shlex.join(running.argv)}'].",
                level,
            )
        if self._shutting_down:
            self._kill_group(running.pid, signal.SIGKILL)
            return
        if description.required:
            if code != 0:
                self._exit_code = EXIT_REQUIRED_PROCESS_FAILED
            self.shutdown(f"required process {description.label} exited with {code} (on_exit: shutdown)")
            return
        if description.respawn:
            done = self._respawn_counts.get(description.label, 0)
            if description.respawn_max_retries < 0 or done < description.respawn_max_retries:
                self._respawn_counts[description.label] = done + 1
                self.say(description.label, f"respawning in {description.respawn_delay:g} s")
                self._respawn_due.append((time.monotonic() + description.respawn_delay, description))

    def _kill_group(self, pgid: int, sig: signal.Signals) -> bool:
        """Signal a whole process group; False when the group no longer exists."""
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            self._groups.discard(pgid)
            return False
        except PermissionError:
            return False
        return True

    def shutdown(self, reason: str) -> None:
        """Stop everything: SIGINT to each process group now, escalating as the timeouts pass."""
        if self._shutting_down:
            return
        self._shutting_down = True
        self._respawn_due.clear()
        self._scheduled.clear()  # pending timers are cancelled, as launch's cancel_on_shutdown
        self.say("launch", f"shutting down: {reason}")
        now = time.monotonic()
        for running in list(self._running.values()):
            running.stop_started = now
            self._send(running, signal.SIGINT)

    def _send(self, running: _Running, sig: signal.Signals) -> None:
        if running.sent:
            previous = running.sent[-1].name
            self.say(running.description.label, f"did not stop after {previous}; sending {sig.name}", "WARNING")
        running.sent.append(sig)
        self._kill_group(running.pid, sig)

    def _escalate(self) -> None:
        now = time.monotonic()
        for running in list(self._running.values()):
            if running.stop_started is None:  # started while shutting down cannot happen; be safe
                running.stop_started = now
                self._send(running, signal.SIGINT)
                continue
            term_after = (
                running.description.sigterm_timeout
                if running.description.sigterm_timeout is not None
                else self.sigterm_timeout
            )
            kill_after = term_after + (
                running.description.sigkill_timeout
                if running.description.sigkill_timeout is not None
                else self.sigkill_timeout
            )
            elapsed = now - running.stop_started
            if signal.SIGTERM not in running.sent and elapsed >= term_after:
                self._send(running, signal.SIGTERM)
            if signal.SIGKILL not in running.sent and elapsed >= kill_after:
                self._send(running, signal.SIGKILL)

    def _handle_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signal_pending = True
        self._events.put(_Signalled(signum))  # SimpleQueue.put is safe in a signal handler

    def run(self, install_signal_handlers: bool = True) -> int:
        """Start every process and supervise until shutdown; returns the launcher's exit status."""
        previous: dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            # SIGHUP too: a closed terminal must not leave the children (in their own sessions) running.
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[sig] = signal.signal(sig, self._handle_signal)
        try:
            self.say("launch", f"all log files can be found below {self.log_dir}")
            start = time.monotonic()
            items: list[ProcessDescription | LogMessage | ShutdownRequest] = [*self.messages, *self.processes]
            if self.shutdown_request is not None:
                items.append(self.shutdown_request)
            delays = [item.start_delay if isinstance(item, ProcessDescription) else item.delay for item in items]
            # In file order; what a `timer` holds waits for its period (a shutdown first cancels it, as in launch).
            self._scheduled = sorted(
                ((start + delay, order, item) for order, (delay, item) in enumerate(zip(delays, items, strict=True))),
                key=lambda entry: (entry[0], entry[1]),
            )
            self._run_due()
            self._loop()
        finally:
            for group in list(self._groups):
                self._kill_group(group, signal.SIGKILL)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self._exit_code

    def _run_due(self) -> None:
        """Start the processes, print the log messages and act on a shutdown whose time has come."""
        now = time.monotonic()
        while self._scheduled and self._scheduled[0][0] <= now:
            if self._shutting_down or self._signal_pending:
                self._scheduled.clear()
                return
            _, _, item = self._scheduled.pop(0)
            if isinstance(item, LogMessage):
                self.say("launch.user", item.text)
            elif isinstance(item, ShutdownRequest):
                self.shutdown(f"{item.reason} (shutdown action at {item.location.path.name}:{item.location.line})")
            else:
                self.start(item)

    def _loop(self) -> None:
        while True:
            self._run_due()
            if not self._running and not self._respawn_due and not self._scheduled:
                if not self._shutting_down:
                    self.say("launch", "all processes have exited")
                return
            try:
                event = self._events.get(timeout=self.poll_interval)
            except queue.Empty:
                event = None
            if isinstance(event, _Exited):
                self._on_exit(event.running)
            elif isinstance(event, _Signalled):
                name = signal.Signals(event.signum).name
                if self._shutting_down:
                    self.say("launch", f"{name} received again; still shutting down", "WARNING")
                else:
                    self.shutdown(f"{name} received")
            if self._shutting_down:
                self._escalate()
                continue
            now = time.monotonic()
            due = [d for at, d in self._respawn_due if at <= now]
            self._respawn_due = [(at, d) for at, d in self._respawn_due if at > now]
            for description in due:
                self.start(description)
