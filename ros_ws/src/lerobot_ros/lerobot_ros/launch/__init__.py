"""A runner for ROS 2 YAML launch files (`lerobot-ros launch`), for installs without `ros2 launch`.

- `entities`, `parser`: launch file -> checked tags -> `LaunchPlan` (launch_ros's YAML frontend: one handler
  per tag; the same planner lists the declared arguments without running the file);
- `processes`: the `node` / `executable` handlers (command line, options, namespace, parameters);
- `substitutions`, `parameters`: launch's `$(...)` grammar and launch_ros's parameter typing;
- `resolved`: a plan as JSON (`--print-json`), the format the conformance tests compare with ros2 launch;
- `packages`: the ament index and console scripts, for `pkg`/`exec` and `$(find-pkg-share)`;
- `supervisor`: runs the plan's processes (output, respawn, ordered shutdown);
- `command`: the `lerobot-ros launch` sub-command.

Nothing here imports rclpy.
"""
