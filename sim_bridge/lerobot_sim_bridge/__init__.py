"""Gymnasium environments bridged to ROS 2 so a simulated robot publishes and accepts what the real one does.

Pure cores (no rclpy): `adapters` (simulations behind one interface), `commands`, `pacing`, `experts`,
`so101.render_assets`. ROS shells: `nodes.bridge`, `nodes.expert`, `ros_env.RosRobotEnv`.
"""
