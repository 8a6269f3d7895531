"""Fleet bag conversion on datatrove: many bags, many tasks, one dataset.

`bag2dataset --executor local|slurm --tasks T --workers W BAG...` runs a datatrove pipeline: the bags, sorted by
their resolved path, are cut into T contiguous shards (`shard_bags`); task `rank` converts shard `rank` with the
ordinary converter (`convert_bags`, one process) into a shard dataset `LOGGING_DIR/datasets/shard-RANK`; W tasks
run at a time. When every task has completed, the shards are merged in rank order (`dataset.merge.merge_datasets`)
into the dataset at OUTPUT, so it equals a single-process conversion of the same sorted bags episode for episode.

Completion is datatrove's: a task that ends writes `LOGGING_DIR/completions/RANK`, and a re-run (same command)
runs only the tasks without one. A task killed part-way leaves its shard dataset resumable (its source records,
`sources.py`), so its re-run converts only what the shard lacks. The default LOGGING_DIR is `OUTPUT.shards`
(next to the dataset); with Slurm it must be on storage every node sees.

What a task does with bad input is what the single-process converter does: a bag that fails part-way is skipped
with its reason (in the task's report); a bag that does not fit the contract refuses its whole shard (the task
fails with that line, the other tasks finish, the merge waits for a re-run that completes it).

`LOGGING_DIR/fleet/` holds this module's own records: `plan.json` (the bags, tasks and settings a re-run must
repeat), `shards/RANK.json` (each task's report), `failed/RANK.json` (why a task failed), `running/RANK` (the
pid converting it: how the local executor notices a worker killed mid-shard), `merged.json` (the merge is done).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datatrove.executor.local import LocalPipelineExecutor
from datatrove.executor.slurm import SlurmPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from datatrove.utils.stats import PipelineStats

from lerobot_bags.convert import ConvertOptions
from lerobot_bags.errors import BagError
from lerobot_bags.sources import SOURCES_PATH, settings_id, settings_of

FLEET_DIR = "fleet"
WATCH_S = 0.5  # how often the local executor's watchdog looks at the running tasks
# A dead worker's task and no task running for this many polls: the pool will return no more results (a pool
# picks up the next task within milliseconds; the lost task's slot in datatrove's rank queue is never freed).
WATCH_QUIET_POLLS = 4
WATCH_SIGNAL = signal.SIGUSR1  # how the watchdog interrupts the main thread's wait (its own handler, see run)


def sorted_bags(bags: Iterable[Path]) -> list[Path]:
    """The bags in the fleet's order: resolved, sorted by path."""
    return sorted((Path(bag).resolve() for bag in bags), key=str)


def shard_bags(bags: Sequence[Path], tasks: int) -> list[list[Path]]:
    """`sorted_bags(bags)` cut into `tasks` contiguous shards whose sizes differ by at most one (earlier shards
    get the extra bag; a shard is empty when there are fewer bags than tasks). Merging the shards in order gives
    the bags' sorted order back."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    ordered = sorted_bags(bags)
    size, extra = divmod(len(ordered), tasks)
    shards: list[list[Path]] = []
    start = 0
    for rank in range(tasks):
        end = start + size + (1 if rank < extra else 0)
        shards.append(ordered[start:end])
        start = end
    return shards


@dataclass(frozen=True)
class FleetJob:
    """One fleet conversion: what every task and the merge need (pickled into each worker / Slurm task)."""

    bags: tuple[Path, ...]
    options: ConvertOptions
    output: Path
    logging_dir: Path
    tasks: int
    repo_id: str
    codec: str | None = None
    keep_shards: bool = False

    @classmethod
    def create(
        cls,
        bags: Sequence[Path],
        options: ConvertOptions,
        output: Path,
        *,
        tasks: int,
        repo_id: str,
        codec: str | None = None,
        logging_dir: Path | None = None,
        keep_shards: bool = False,
    ) -> FleetJob:
        if not bags:
            raise BagError("no bag given")
        if tasks < 1:
            raise BagError(f"--tasks {tasks}: give at least 1 task")
        output = Path(output).resolve()
        return cls(
            bags=tuple(sorted_bags(bags)),
            options=options,
            output=output,
            logging_dir=Path(logging_dir).resolve() if logging_dir else default_logging_dir(output),
            tasks=tasks,
            repo_id=repo_id,
            codec=codec,
            keep_shards=keep_shards,
        )

    @property
    def records(self) -> Path:
        return self.logging_dir / FLEET_DIR

    def shard(self, rank: int) -> list[Path]:
        return shard_bags(self.bags, self.tasks)[rank]

    def shard_root(self, rank: int) -> Path:
        return self.logging_dir / "datasets" / f"shard-{rank:05d}"

    def plan(self) -> dict[str, Any]:
        """What a re-run must repeat for the completions in the logging dir to mean the same shards."""
        return {
            "bags": [str(bag) for bag in self.bags],
            "tasks": self.tasks,
            "settings": settings_id(settings_of(self.options)),
            "codec": self.codec,
            "repo_id": self.repo_id,
            "output": str(self.output),
        }


def default_logging_dir(output: Path) -> Path:
    """OUTPUT.shards, next to the dataset."""
    output = Path(output).resolve()
    return output.parent / f"{output.name}.shards"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


class ConvertShard(PipelineStep):  # type: ignore[misc]
    """Task `rank`: convert shard `rank` of the job's bags into its shard dataset (resuming one a killed task left)."""

    name = "bag2dataset shard"
    type = "CONVERT"

    def __init__(self, job: FleetJob) -> None:
        super().__init__()
        self.job = job

    def run(self, data: Any = None, rank: int = 0, world_size: int = 1) -> None:
        from lerobot_bags.pipeline import convert_bags

        job = self.job
        running = job.records / "running" / f"{rank:05d}"
        running.parent.mkdir(parents=True, exist_ok=True)
        running.write_text(str(os.getpid()))
        bags = job.shard(rank)
        report: dict[str, Any] = {"rank": rank, "bags": [str(b) for b in bags], "root": None}
        if bags:
            root = job.shard_root(rank)
            root.parent.mkdir(parents=True, exist_ok=True)
            result = convert_bags(bags, job.options, root=root, repo_id=job.repo_id, codec=job.codec, jobs=1)
            report.update(result.as_dict())
            report["root"] = str(root) if (root / "meta" / "info.json").is_file() else None
            self.stat_update("bags", value=len(bags))
            self.stat_update("episodes", value=len(result.episodes))
            self.stat_update("frames", value=result.frames)
        _write_json(job.records / "shards" / f"{rank:05d}.json", report)


class MergeShards(PipelineStep):  # type: ignore[misc]
    """The last step (one task): merge every shard dataset, in rank order, into the job's output."""

    name = "bag2dataset merge"
    type = "MERGE"

    def __init__(self, job: FleetJob) -> None:
        super().__init__()
        self.job = job

    def run(self, data: Any = None, rank: int = 0, world_size: int = 1) -> None:
        merge_shards(self.job)


@dataclass
class FleetResult:
    """What a fleet run did."""

    tasks: int
    ran: list[int] = field(default_factory=list)  # ranks this run started
    failed: dict[int, str] = field(default_factory=dict)  # rank -> why it did not complete
    shards: list[dict[str, Any]] = field(default_factory=list)  # the task reports, in rank order
    merged: dict[str, Any] | None = None  # merge summary, once merged
    already_merged: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return self.merged is not None


def check_plan(job: FleetJob) -> None:
    """Record the job's plan in its logging dir, or refuse when the logging dir holds another plan (completions
    are per rank: other bags or another --tasks would make them name other shards)."""
    path = job.records / "plan.json"
    plan = job.plan()
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise BagError(f"{path} cannot be read ({err}); remove {job.logging_dir} to start over") from None
        if stored != plan:
            what = [key for key in plan if stored.get(key) != plan[key]]
            raise BagError(
                f"{job.logging_dir} holds a fleet conversion with other {', '.join(what)}; repeat that command "
                "unchanged to resume it, or pass another --logging-dir (or remove it) to start a new one"
            )
        return
    if job.output.exists():
        raise BagError(f"{job.output} exists; choose a new --output (the shards are merged into a new dataset)")
    _write_json(path, plan)


def merge_shards(job: FleetJob) -> dict[str, Any]:
    """Merge the shard datasets in rank order into `job.output`, then record it (and drop the shards unless
    `keep_shards`). The merged dataset carries every shard's source records, renumbered."""
    from lerobot_dataset.errors import DatasetError
    from lerobot_dataset.merge import merge_datasets

    marker = job.records / "merged.json"
    if marker.is_file() and job.output.exists():
        merged: dict[str, Any] = json.loads(marker.read_text())
        return merged
    reports = _shard_reports(job)
    roots = [Path(r["root"]) for r in reports if r.get("root")]
    missing = [str(root) for root in roots if not (root / "meta" / "info.json").is_file()]
    if missing:
        raise BagError(f"shard dataset(s) {', '.join(missing)} are gone; remove {job.logging_dir} and start over")
    if not roots:
        raise BagError("no episode was written by any task (see the skipped/failed bags of each shard)")
    try:
        report = merge_datasets(roots, job.output)
    except DatasetError as err:
        raise BagError(f"merging the shards of {job.logging_dir} into {job.output} failed: {err}") from None
    _merge_sources(roots, job.output)
    _write_json(
        job.output.parent / f"{job.output.name}.sync_report.json",
        {"dataset": str(job.output), "runs": _merged_runs(reports, job.output)},
    )
    summary = {"output": str(job.output), "episodes": report.episodes, "frames": report.frames, "shards": len(roots)}
    _write_json(marker, summary)
    if not job.keep_shards:
        shutil.rmtree(job.logging_dir / "datasets", ignore_errors=True)
    return summary


def _shard_reports(job: FleetJob) -> list[dict[str, Any]]:
    reports = []
    for rank in range(job.tasks):
        path = job.records / "shards" / f"{rank:05d}.json"
        if not path.is_file():
            raise BagError(f"task {rank} has no report ({path}); it has not completed: run the command again")
        reports.append(json.loads(path.read_text()))
    return reports


def _merged_runs(reports: Sequence[dict[str, Any]], output: Path) -> list[dict[str, Any]]:
    """The shard tasks' sync-report runs with the merged dataset's episode indices.

    Each task numbered its episodes in its own shard dataset (from 0); the merge appends the shards in rank order,
    so a shard's episode i is episode offset + i of the merged dataset, offset being the episodes of the shards
    before it. Each run keeps where it came from under `shard` (rank, shard dataset, offset)."""
    runs = []
    offset = 0
    for report in reports:
        root = report.get("root")
        if report.get("bags"):
            run = {key: value for key, value in report.items() if key != "rank"}
            for key in ("episodes", "already_converted"):
                run[key] = [
                    {**entry, "episode_index": int(entry["episode_index"]) + offset}
                    if isinstance(entry, dict) and "episode_index" in entry
                    else entry
                    for entry in report.get(key, [])
                ]
            run["root"] = str(output)
            run["shard"] = {"rank": report.get("rank"), "root": root, "episode_offset": offset}
            runs.append(run)
        if root:
            info = json.loads((Path(root) / "meta" / "info.json").read_text())
            offset += int(info["total_episodes"])
    return runs


def _merge_sources(roots: Sequence[Path], output: Path) -> None:
    """The shards' source records in one file, episode indices shifted as the merge shifted them."""
    merged: dict[str, Any] = {"settings": {}, "episodes": [], "bags": []}
    offset = 0
    for root in roots:
        path = root / SOURCES_PATH
        info = json.loads((root / "meta" / "info.json").read_text())
        if path.is_file():
            data = json.loads(path.read_text())
            merged.setdefault("format", data["format"])
            merged.setdefault("hash", data["hash"])
            merged["settings"].update(data["settings"])
            merged["episodes"].extend(
                {**e, "episode_index": int(e["episode_index"]) + offset}
                for e in data["episodes"]
                if int(e["episode_index"]) < int(info["total_episodes"])
            )
            merged["bags"].extend(data["bags"])
        offset += int(info["total_episodes"])
    if "format" in merged:
        _write_json(output / SOURCES_PATH, merged)


class FleetLocalExecutor(LocalPipelineExecutor):  # type: ignore[misc]
    """datatrove's LocalPipelineExecutor with two changes for a fleet of shards:

    * a task that raises is recorded (`fleet/failed/RANK.json`) and the other tasks go on (the stock executor's
      pool ends at the first exception, terminating the tasks still converting); the failed task has no
      completion, so the next run runs it again;
    * a worker killed mid-task (SIGKILL, the OOM killer) is noticed: the stock pool waits forever for the result
      of a task whose worker died. A watchdog thread reads the pids the tasks write to `fleet/running/` and,
      once a task lost its worker and no task is running any more, interrupts the wait; `run` then raises
      `WorkersDied` naming the tasks, which the next run resumes. It interrupts with SIGUSR1 and a handler of
      its own, not SIGINT: a process started with SIGINT ignored (a shell script's `cmd &`, nohup, some CI
      runners) kept ignoring it, and the wait never ended.
    """

    def __init__(self, job: FleetJob, pipeline: list[PipelineStep], **kwargs: Any) -> None:
        super().__init__(pipeline, **kwargs)
        self.job = job
        self._watch_fired: list[int] = []

    def _launch_run_for_rank(
        self, rank: int, ranks_q: Any, completed: Any = None, completed_lock: Any = None
    ) -> PipelineStats:
        try:
            stats: PipelineStats = super()._launch_run_for_rank(rank, ranks_q, completed, completed_lock)
        except Exception as err:  # datatrove has logged it with its traceback in logs/task_RANK.log
            _write_json(self.job.records / "failed" / f"{rank:05d}.json", {"rank": rank, "error": _one_line(err)})
            return PipelineStats()
        return stats

    def run(self) -> Any:
        ranks = self.get_incomplete_ranks(range(self.tasks))
        for folder in ("running", "failed"):
            shutil.rmtree(self.job.records / folder, ignore_errors=True)
        if self.workers == 1 or not ranks:
            return super().run()  # the tasks run in this process: nothing can die without it
        if threading.current_thread() is not threading.main_thread():
            return super().run()  # only the main thread's wait can be interrupted by a signal: no watchdog
        stop = threading.Event()
        previous = signal.signal(WATCH_SIGNAL, _interrupt_wait)
        watchdog = threading.Thread(target=self._watch, args=(ranks, stop), name="fleet-watchdog", daemon=True)
        watchdog.start()
        try:
            return super().run()
        except KeyboardInterrupt:
            if self._watch_fired:
                raise WorkersDied(self._watch_fired) from None
            raise
        finally:
            stop.set()
            watchdog.join()
            signal.signal(WATCH_SIGNAL, previous)

    def _watch(self, ranks: Sequence[int], stop: threading.Event) -> None:
        main = threading.main_thread().ident
        quiet = 0  # polls in a row with a dead worker's task and no task running
        while not stop.wait(WATCH_S):
            states = {rank: task_state(self.job, rank) for rank in ranks}
            died = [rank for rank, state in states.items() if state == "died"]
            quiet = quiet + 1 if died and "running" not in states.values() else 0
            if quiet >= WATCH_QUIET_POLLS:
                self._watch_fired[:] = died
                if main is not None:
                    signal.pthread_kill(main, WATCH_SIGNAL)
                return


def _interrupt_wait(signum: int, frame: Any) -> None:
    """The watchdog's signal in the main thread: end datatrove's wait for the pool as Ctrl-C would."""
    raise KeyboardInterrupt(f"fleet watchdog: a task's worker died (signal {signum})")


class WorkersDied(BagError):
    """Workers were killed while converting these tasks (the other tasks finished)."""

    def __init__(self, ranks: Sequence[int]) -> None:
        self.ranks = list(ranks)
        super().__init__(
            f"the worker(s) converting task(s) {', '.join(map(str, self.ranks))} died (killed) before finishing; "
            "the other tasks finished. Run the same command again: it resumes only the unfinished tasks"
        )


def task_state(job: FleetJob, rank: int) -> str:
    """completed, failed, running, died (its worker is gone without completing) or pending."""
    if (job.logging_dir / "completions" / f"{rank:05d}").is_file():
        return "completed"
    if (job.records / "failed" / f"{rank:05d}.json").is_file():
        return "failed"
    running = job.records / "running" / f"{rank:05d}"
    try:
        pid = int(running.read_text())
    except (OSError, ValueError):
        return "pending"
    if (job.logging_dir / "completions" / f"{rank:05d}").is_file():
        return "completed"  # completed between the two reads
    return "running" if _alive(pid) else "died"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")  # a killed pool worker stays a zombie until the pool reaps it


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}" if not isinstance(err, BagError) else str(err)


def local_executor(
    job: FleetJob, workers: int, step: Callable[[FleetJob], PipelineStep] = ConvertShard
) -> FleetLocalExecutor:
    """The executor of the conversion tasks on this machine (`workers` at a time, forkserver processes)."""
    return FleetLocalExecutor(
        job,
        [step(job)],
        tasks=job.tasks,
        workers=workers,
        logging_dir=str(job.logging_dir),
        skip_completed=True,
    )


def run_local(
    job: FleetJob,
    workers: int,
    *,
    step: Callable[[FleetJob], PipelineStep] = ConvertShard,
    on_status: Callable[[str], None] | None = None,
) -> FleetResult:
    """Convert the job's shards on this machine, then merge them (only when every task has completed).

    A failed or killed task is reported in `FleetResult.failed` (the others finish) and nothing is merged;
    running the same job again runs only the tasks without a completion, then merges. BagError when the
    logging dir holds another job or the output exists.
    """
    started = time.monotonic()
    result = FleetResult(tasks=job.tasks)
    check_plan(job)
    if (job.records / "merged.json").is_file() and job.output.exists():
        result.already_merged = True
        result.merged = merge_shards(job)
        return result
    executor = local_executor(job, workers, step)
    result.ran = executor.get_incomplete_ranks(range(job.tasks))
    if on_status is not None and len(result.ran) < job.tasks:
        on_status(f"{job.tasks - len(result.ran)} of {job.tasks} task(s) completed before; running {len(result.ran)}")
    died: list[int] = []
    try:
        executor.run()
    except WorkersDied as err:
        died = err.ranks
    for rank in range(job.tasks):
        state = task_state(job, rank)
        if state == "completed":
            continue
        failed = job.records / "failed" / f"{rank:05d}.json"
        if failed.is_file():
            result.failed[rank] = str(json.loads(failed.read_text())["error"])
        elif rank in died:
            result.failed[rank] = "its worker died (killed) before the task finished"
        else:
            result.failed[rank] = f"did not complete ({state})"
    if not result.failed:
        result.shards = _shard_reports(job)
        result.merged = merge_shards(job)
    else:
        result.shards = [
            json.loads(p.read_text()) for p in sorted((job.records / "shards").glob("*.json")) if p.is_file()
        ]
    result.seconds = time.monotonic() - started
    return result


@dataclass(frozen=True)
class SlurmSettings:
    """Slurm job settings of a fleet conversion (the sbatch directives datatrove writes)."""

    partition: str
    time: str = "04:00:00"
    cpus_per_task: int = 1
    mem_per_cpu_gb: int = 4
    workers: int = -1  # array tasks running at once (-1: as many as Slurm allows)
    job_name: str = "bag2dataset"
    venv_activate: str | None = None  # default: this interpreter's venv (bin/activate)
    sbatch_args: tuple[tuple[str, str], ...] = ()
    qos: str = ""

    def __post_init__(self) -> None:
        if not self.partition:
            raise ValueError("partition: give the Slurm partition to run on (--slurm-partition NAME)")
        if self.cpus_per_task < 1 or self.mem_per_cpu_gb < 1:
            raise ValueError("cpus_per_task and mem_per_cpu_gb must be >= 1")


def slurm_executors(job: FleetJob, slurm: SlurmSettings) -> tuple[SlurmPipelineExecutor, SlurmPipelineExecutor]:
    """(conversion, merge): an array job of `job.tasks` tasks, and a one-task merge job that starts after every
    conversion task succeeded (`afterok`). `merge.run()` submits both with sbatch."""
    activate = slurm.venv_activate or str(Path(sys.prefix) / "bin" / "activate")
    common: dict[str, Any] = {
        "time": slurm.time,
        "partition": slurm.partition,
        "mem_per_cpu_gb": slurm.mem_per_cpu_gb,
        "venv_path": activate,
        "qos": slurm.qos,
        "sbatch_args": dict(slurm.sbatch_args),
        "skip_completed": True,
        "mail_user": None,
    }
    convert = SlurmPipelineExecutor(
        [ConvertShard(job)],
        tasks=job.tasks,
        workers=slurm.workers,
        cpus_per_task=slurm.cpus_per_task,
        job_name=slurm.job_name,
        logging_dir=str(job.logging_dir),
        **common,
    )
    merge = SlurmPipelineExecutor(
        [MergeShards(job)],
        tasks=1,
        workers=1,
        cpus_per_task=max(1, slurm.cpus_per_task),
        job_name=f"{slurm.job_name}-merge",
        logging_dir=str(job.logging_dir / "merge"),
        depends=convert,
        **common,
    )
    return convert, merge


def slurm_script(executor: SlurmPipelineExecutor) -> str:
    """The sbatch script `executor.launch_job()` writes and submits (same directives and command), without
    submitting: for review, and what the tests check."""
    ranks = executor.get_incomplete_ranks()
    max_array = min(len(ranks), executor.max_array_size) if executor.max_array_size != -1 else len(ranks)
    command = f"launch_pickled_pipeline {executor.logging_dir.resolve_paths('executor.pik')}"
    if executor.with_srun:
        command = f"srun  -l -n {executor.nodes_per_task} {command}"
    script: str = executor.get_launch_file_contents(executor.get_sbatch_args(max(1, max_array)), command)
    return script


def submit_slurm(job: FleetJob, slurm: SlurmSettings) -> tuple[str, str]:
    """Submit the conversion array job and the merge job with sbatch; returns their job ids."""
    check_plan(job)
    convert, merge = slurm_executors(job, slurm)
    if shutil.which("sbatch") is None:
        raise BagError("sbatch not found: --executor slurm submits with Slurm's sbatch; run it on a Slurm login node")
    merge.run()
    return str(convert.job_id), str(merge.job_id)
