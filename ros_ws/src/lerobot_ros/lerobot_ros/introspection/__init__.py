"""`lerobot-ros topic ...` and `lerobot-ros node ...`: the ROS graph introspection commands."""
