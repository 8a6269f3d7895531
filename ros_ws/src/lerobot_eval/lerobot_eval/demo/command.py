"""`lerobot-ros demo`: the whole mission in simulation: record demonstrations, train ACT, deploy it, report.

  lerobot-ros demo all       # what `make demo` runs: every stage below, then the report
  lerobot-ros demo record    # SO-101 sim + scripted expert + recorder -> LeRobot v3 dataset
  lerobot-ros demo train     # ACT on that dataset (CPU), checkpoints the policy node loads
  lerobot-ros demo eval      # policy node + action executor drive the sim in real time on unseen seeds
                             #   --num-envs N: N in-process sims in lockstep; --num-envs N --through-ros: N robots
  lerobot-ros demo report    # report.md with the training curve, success vs the expert, latency, a GIF

Every stage keeps its results in --workdir and resumes from them: a second `demo all` only does what is
missing (more episodes, more training steps, more evaluation episodes), so an interrupted demo continues.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from lerobot_eval.demo.workspace import DemoLayout, DemoSettings, read_json
from lerobot_ros.command import Command, CommandError

VERBS = {
    "all": "record, train, eval and report (what `make demo` runs)",
    "record": "record sim demonstrations into a LeRobot v3 dataset",
    "train": "train ACT on the demo dataset (CPU)",
    "eval": "deploy the policy with the policy node and executor against the sim",
    "report": "write report/report.md with plots from the work folder",
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoSettings()
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in VERBS.items():
        sub = verbs.add_parser(
            verb, help=text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        sub.add_argument(
            "--workdir", type=Path, default=Path("outputs/demo"), help="work folder (default outputs/demo)"
        )
        if verb in ("all", "record"):
            sub.add_argument("--episodes", type=int, default=d.episodes, help=f"demonstrations (default {d.episodes})")
            sub.add_argument("--seed", type=int, default=d.seed, help=f"seed of the first demonstration ({d.seed})")
            sub.add_argument("--task", default=d.task, help="task text")
            sub.add_argument("--max-episode-s", type=float, default=d.max_episode_s, help="cut a demonstration after")
            sub.add_argument("--codec", choices=("h264", "libsvtav1"), default=d.codec, help="video codec (h264)")
            sub.add_argument(
                "--record-speed", type=float, default=d.record_real_time_factor, metavar="FACTOR",
                help="at most FACTOR simulated seconds per wall second while recording, 0 = as fast as the expert "
                f"answers (default {d.record_real_time_factor:g}); the frames are the same at any speed",
            )  # fmt: skip
            sub.add_argument("--timeout", type=float, default=1800.0, help="give up recording after this long (s)")
        if verb in ("all", "train"):
            sub.add_argument("--train-steps", type=int, default=d.train_steps, help=f"steps ({d.train_steps})")
            sub.add_argument("--batch-size", type=int, default=d.batch_size, help=f"batch ({d.batch_size})")
            sub.add_argument("--restart", action="store_true", help="discard the existing training run")
        if verb in ("all", "eval"):
            sub.add_argument("--eval-episodes", type=int, default=d.eval_episodes, help=f"({d.eval_episodes})")
            sub.add_argument("--eval-seed", type=int, default=d.eval_seed, help=f"first eval seed ({d.eval_seed})")
            sub.add_argument(
                "--eval-max-s", type=float, default=d.eval_max_s, help=f"episode limit ({d.eval_max_s:g} s)"
            )
            sub.add_argument(
                "--num-envs", nargs="?", const="auto", default=None, metavar="N",
                help="evaluate in lockstep on N in-process sims at once instead of the real-time ROS stack "
                "(alone or 'auto': one per core)",
            )  # fmt: skip
            sub.add_argument(
                "--realtime", action=argparse.BooleanOptionalAction, dest="eval_realtime", default=None,
                help="the real-time evaluation's sim loop and executor tick run SCHED_FIFO where permitted (one "
                "warning when not; the default); --no-realtime: normal scheduling",
            )  # fmt: skip
            sub.add_argument(
                "--through-ros", action="store_true",
                help="with --num-envs N: N sim bridges (real time, namespaces /robot_0..) driven by N action executors "
                "and one policy node batching their observations, instead of in-process sims",
            )  # fmt: skip


def _settings(args: argparse.Namespace) -> DemoSettings:
    names = {
        "episodes": "episodes", "seed": "seed", "task": "task", "max_episode_s": "max_episode_s", "codec": "codec",
        "record_speed": "record_real_time_factor", "train_steps": "train_steps", "batch_size": "batch_size",
        "eval_episodes": "eval_episodes", "eval_realtime": "eval_realtime",
        "eval_seed": "eval_seed", "eval_max_s": "eval_max_s",
    }  # fmt: skip
    given = {field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag, None) is not None}
    if given.get("record_real_time_factor", 0.0) < 0:
        raise CommandError(f"--record-speed must be >= 0 (0 = unlimited), got {given['record_real_time_factor']}")
    for name in ("episodes", "train_steps", "batch_size", "eval_episodes"):
        if name in given and given[name] < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1, got {given[name]}")
    return DemoSettings(**given)


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if getattr(args, "through_ros", False) and getattr(args, "num_envs", None) is None:  # before `all` records
        raise CommandError("--through-ros runs several robots at once: give --num-envs N (or --num-envs auto)")
    layout = DemoLayout(args.workdir.resolve())
    layout.root.mkdir(parents=True, exist_ok=True)
    timings = read_json(layout.timings)

    def say(text: str) -> None:
        print(text, flush=True)

    def timed(stage: str, work: Callable[[], None]) -> None:
        start = time.monotonic()
        work()
        timings[stage] = round(timings.get(stage, 0.0) + time.monotonic() - start, 1)
        layout.timings.write_text(json.dumps(timings, indent=2) + "\n")

    verb = args.verb
    if verb in ("all", "record"):
        from lerobot_eval.demo.record import record

        def do_record() -> None:
            summary = record(layout, settings, say, args.timeout)
            layout.record_summary.write_text(json.dumps(summary, indent=2) + "\n")
            say(
                f"record: {summary['dataset']}: {summary['episodes']} episodes, {summary['frames']} frames, "
                f"{summary['dropped']} dropped, expert {summary['expert_successes']}/{summary['expert_episodes']}, "
                + ("valid LeRobot v3.0" if summary["valid"] else "INVALID: " + "; ".join(summary["problems"]))
            )
            if not summary["valid"]:
                raise CommandError(f"the dataset in {layout.dataset} is not valid; see above", exit_code=1)

        timed("record", do_record)
    if verb in ("all", "train"):
        from lerobot_eval.demo.train import train

        timed("train", lambda: say(f"train: checkpoint {train(layout, settings, say, args.restart)}"))
    if verb in ("all", "eval"):
        from lerobot_eval.demo.evaluate import evaluate

        def do_eval() -> None:
            summary = evaluate(layout, settings, say, args.num_envs, args.through_ros)
            say(
                f"eval: policy {summary['successes']}/{summary['episodes']} successful, scripted expert "
                f"{summary['expert_successes']}/{summary['episodes']} on the same seeds"
            )

        timed("eval", do_eval)
    from lerobot_eval.demo.report import build_report

    _, text = build_report(layout)
    say("")
    say(text)
    return 0


DEMO = Command(
    name="demo",
    help="the closed loop in simulation: demo record | train | eval | report | all",
    add_arguments=_add_arguments,
    run=_run,
    description=__doc__ or "",
)
