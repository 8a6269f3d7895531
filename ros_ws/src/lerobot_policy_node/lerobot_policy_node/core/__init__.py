"""Pure cores of the policy runtime (no rclpy): chunk execution, inference scheduling, the scripted test policy.

The ROS shells live in `lerobot_policy_node.nodes`.
"""
