"""A runner for ROS 2 YAML launch files (`lerobot-ros launch`), for installs without `ros2 launch`.

- `parser`: launch file -> `LaunchPlan` (tags, substitutions, arguments, includes, groups);
- `packages`: the ament index and console scripts, for `pkg`/`exec` and `$(find-pkg-share)`;
- `supervisor`: runs the plan's processes (output, respawn, ordered shutdown);
- `command`: the `lerobot-ros launch` sub-command.

Nothing here imports rclpy.
"""
