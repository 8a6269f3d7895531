"""Run a fuzz target over many inputs in a worker process, with a per-input watchdog, and count the outcomes.

Every input ends in exactly one outcome:

* ``ok``: accepted, and what came out equals what the unmutated input gives (or the target has no reference);
* ``changed``: accepted, and what came out differs from the unmutated input's result in a way the target can name
  (``AcceptedChanged`` with a short kind, e.g. "a value's bytes changed: CDR carries no checksum"); the kinds are
  counted separately so that each one can be explained as intended or fixed;
* ``clear_error``: refused with one of the target's typed project errors, whose message is one non-empty line;
* ``crash``: any other exception (or a typed error whose message is empty or spans several lines);
* ``hang``: the input did not finish within the per-input budget (the worker is killed and restarted, the next
  input goes on); the budget is generous (10 s by default) because it is a watchdog, not a speed check;
* ``data_lost``: accepted, but what came out is wrong in a way nobody is told about (non-finite values called
  valid, frames silently missing, a valid input refused after a bad one).

Inputs are generated from ``(seed, index)`` inside the worker, so a finding is reproduced by running the target
on that one index (`reproduce`). Workers are spawned (not forked), so nothing of the test process leaks in.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing as mp
import os
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

OUTCOMES = ("ok", "changed", "clear_error", "crash", "hang", "data_lost")
BAD_OUTCOMES = ("crash", "hang", "data_lost")
MAX_FINDINGS = 20


class DataLost(Exception):
    """Raised by a target when an accepted input produced wrong output that nobody was told about."""


class AcceptedChanged(Exception):
    """Raised by a target when an input was accepted and its output differs from the reference; the message is the
    kind of change (short, stable: it is a row of the table of explained changes)."""


class Target(Protocol):
    """One parser or intake path under test."""

    name: str
    clear_errors: tuple[type[BaseException], ...]

    def setup(self, workdir: Path) -> None:
        """Build what every input derives from (base bags, a contract), once per worker."""

    def run(self, seed: int, index: int) -> str | None:
        """Generate input `index` from `seed`, feed it, check the result; returns a short description of it.

        Raises one of `clear_errors` when the input is refused, `DataLost` when it is accepted wrongly,
        `AcceptedChanged` when it is accepted with output that differs from the unmutated input's.
        """


@dataclass
class Finding:
    """One bad outcome with what reproduces it."""

    target: str
    outcome: str
    seed: int
    index: int
    input: str
    detail: str


@dataclass
class Counts:
    """Outcome counts of one target."""

    target: str
    tried: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    findings: list[Finding] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=dict)
    changed_kinds: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, outcome: str, finding: Finding | None = None, *, kind: str = "") -> None:
        self.tried += 1
        self.counts[outcome] += 1
        if outcome == "changed":
            self.changed_kinds[kind] = self.changed_kinds.get(kind, 0) + 1
        # Up to MAX_FINDINGS of each bad outcome: one kind found often must not hide where a rarer one happened
        # (seed 2 of recorder_messages: 44 data-lost inputs filled the list and the one hang's index was lost).
        if finding is not None and sum(f.outcome == outcome for f in self.findings) < MAX_FINDINGS:
            self.findings.append(finding)

    @property
    def bad(self) -> int:
        return sum(self.counts[o] for o in BAD_OUTCOMES)

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "tried": self.tried,
            **self.counts,
            "extra": dict(self.extra),
            "changed_kinds": dict(sorted(self.changed_kinds.items())),
            "seconds": round(self.seconds, 1),
            "findings": [dataclasses.asdict(f) for f in self.findings],
        }

    def summary(self) -> str:
        """One line per finding kind, for assertion messages."""
        counted = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines = [f"{self.target}: {self.tried} tried, {counted}"]
        for f in self.findings[:8]:
            last = f.detail.strip().splitlines()[-1][:300] if f.detail.strip() else ""
            lines.append(f"  {f.outcome} at seed={f.seed} index={f.index} ({f.input}): {last}")
        return "\n".join(lines)


def load_target(spec: str) -> Target:
    """`module:Class` -> a fresh target instance."""
    module, _, name = spec.partition(":")
    target: Target = getattr(importlib.import_module(module), name)()
    return target


def classify(target: Target, seed: int, index: int) -> tuple[str, str, str]:
    """(outcome, input description, detail) of one input, run in this process."""
    described = ""

    try:
        described = target.run(seed, index) or ""
    except DataLost as err:
        return "data_lost", described, str(err)
    except AcceptedChanged as err:
        return "changed", described, str(err)
    except target.clear_errors as err:
        text = str(err)
        if not text.strip() or "\n" in text.strip():
            return "crash", described, f"{type(err).__name__} without a one-line message: {text!r}"
        return "clear_error", described, f"{type(err).__name__}: {text}"
    except Exception:
        return "crash", described, traceback.format_exc()
    return "ok", described, ""


def _worker(spec: str, seed: int, indices: list[int], conn: Any) -> None:
    target = load_target(spec)
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{target.name}-") as tmp:
        target.setup(Path(tmp))
        conn.send(("ready", None))
        for index in indices:
            outcome, described, detail = classify(target, seed, index)
            extra = getattr(target, "last_extra", None)
            conn.send(("done", (index, outcome, described, detail, extra)))
            if hasattr(target, "last_extra"):
                target.last_extra = None
    conn.close()


def run_target(
    spec: str,
    count: int,
    *,
    seed: int = 0,
    budget_s: float = 10.0,
    setup_budget_s: float = 300.0,
    start: int = 0,
    progress: Callable[[Counts], None] | None = None,
    label: str | None = None,
    max_hangs: int = 5,
) -> Counts:
    """Run inputs ``start .. start+count-1`` of target `spec` (``module:Class``) and count the outcomes.

    A worker that does not answer within `budget_s` of its previous answer is killed: that input is a hang,
    and a fresh worker continues with the next input. After `max_hangs` hangs the rest is not run (counted in
    ``extra["not_run_after_hangs"]``): the target is broken, and each hang costs the whole budget.
    """
    ctx = mp.get_context("spawn")
    name = label or spec.rpartition(":")[2]
    counts = Counts(name)
    begin = time.monotonic()
    pending = list(range(start, start + count))
    while pending:
        if counts.counts["hang"] >= max_hangs:
            counts.extra["not_run_after_hangs"] = len(pending)
            break
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(spec, seed, pending, child), daemon=True)
        proc.start()
        child.close()
        try:
            try:
                ready = parent.poll(setup_budget_s) and parent.recv()[0] == "ready"
            except EOFError:
                ready = False
            if not ready:
                raise RuntimeError(f"fuzz worker for {spec} did not set up within {setup_budget_s} s (see its stderr)")
            while pending:
                if not parent.poll(budget_s):
                    index = pending.pop(0)
                    counts.add("hang", Finding(name, "hang", seed, index, "", f"no answer within {budget_s} s"))
                    break
                _, (index, outcome, described, detail, extra) = parent.recv()
                assert index == pending[0], (index, pending[0])
                pending.pop(0)
                finding = Finding(name, outcome, seed, index, described, detail) if outcome in BAD_OUTCOMES else None
                counts.add(outcome, finding, kind=detail if outcome == "changed" else "")
                for key, value in (extra or {}).items():
                    counts.extra[key] = counts.extra.get(key, 0) + int(value)
                if progress is not None and counts.tried % 1000 == 0:
                    progress(counts)
        except EOFError:
            # The worker died (segfault, os._exit, killed by the OOM killer): a crash of the current input.
            index = pending.pop(0)
            counts.add("crash", Finding(name, "crash", seed, index, "", f"worker died, exit code {proc.exitcode}"))
        finally:
            if not pending:
                proc.join(30)  # the last worker removes its temporary directory on its way out
            if proc.is_alive():
                proc.kill()
            proc.join(10)
            parent.close()
    counts.seconds = time.monotonic() - begin
    return counts


def reproduce(spec: str, seed: int, index: int) -> tuple[str, str, str]:
    """Run one input in this process (for a finding's traceback under a debugger)."""
    target = load_target(spec)
    with tempfile.TemporaryDirectory(prefix=f"repro-{target.name}-") as tmp:
        target.setup(Path(tmp))
        return classify(target, seed, index)


def default_count(quick: int, full: int) -> int:
    """`full` when the reliability run is on (make reliability), else `quick` (the default test run)."""
    return full if os.environ.get("LEROBOT_ROS_RELIABILITY") == "1" else quick
