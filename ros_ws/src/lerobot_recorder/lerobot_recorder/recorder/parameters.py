"""The recorder node's parameters: one table (`lerobot_ros.node_kit`) that declares, checks and types them."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_ros.node_kit.parameters import param


@dataclass(frozen=True)
class RecorderParameters:
    """Parameters of `lerobot_recorder.nodes.recorder` (read-only unless `read_only=False`)."""

    contract: str = param("", "robot contract YAML (topics, fields, units, fps of every feature)")
    root: str = param("", "dataset folder")
    repo_id: str = param("", "dataset repo id (user/name); default local/<root folder name>")
    fps: int = param(0, "dataset fps; 0 = the contract's", low=0, high=1000)
    task: str = param("", "task text of the next episodes (changeable at run time)", read_only=False)
    episode_time_s: float = param(60.0, "length of each episode", low=0.01, high=86400.0)
    reset_time_s: float = param(60.0, "pause between episodes to reset the scene", low=0.0, high=86400.0)
    num_episodes: int = param(50, "episodes of a session", low=1, high=10**6)
    resume: bool = param(False, "append to the dataset at root (it must exist and have the contract's schema)")
    video: bool = param(True, "encode cameras as video (false: PNG images in the parquet files)")
    video_codec: str = param("libsvtav1", "libsvtav1 (LeRobot's default) or h264 (faster)")
    push_to_hub: bool = param(False, "upload the dataset to the Hub at the end of a session")
    private: bool = param(False, "with push_to_hub: create a private repo")
    start_session: bool = param(True, "start a session of num_episodes at activation (false: wait for controls)")
    autostart: bool = param(True, "configure and activate at start-up")
    shutdown_when_done: bool = param(False, "exit once the session has stopped (for launch files and scripts)")
    latency_s: float = param(0.15, "how long a frame waits for late messages", low=0.0, high=5.0)
    startup_timeout_s: float = param(
        10.0, "wait this long at configure for the contract topics; 0 = do not check", low=0.0, high=3600.0
    )
    reliable: bool = param(False, "subscribe RELIABLE (needs reliable publishers); default BEST_EFFORT")
    queue_depth: int = param(
        30,
        "subscription depth of each topic; keep it >= 2 x rate x latency_s (overflow is counted as lost)",
        low=1,
        high=10000,
    )
    max_queue_s: float = param(
        2.0, "sampled frames waiting for the writer, in seconds, before frames are dropped", low=0.1, high=600.0
    )
    min_free_mb: float = param(100.0, "stop recording below this much free disk space", low=0.0, high=1e7)
    topic_timeout_s: float = param(
        5.0,
        "a contract topic with no usable message this long is silent: the episode being recorded ends (saved) and "
        "no episode starts until it delivers again",
        low=0.05,
        high=3600.0,
    )
    topic_wait_s: float = param(
        60.0, "how long a session waits for a silent topic before it stops in the error state", low=0.0, high=86400.0
    )
    clock_jump_s: float = param(1.0, "a stamp or clock going back more than this is a clock reset", low=0.001, high=1e6)
    diagnostics_period: float = param(1.0, "seconds between /diagnostics reports", low=0.05, high=60.0)
