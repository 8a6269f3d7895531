"""Command-line tools of the LeRobot ROS 2 stack.

A YAML launch-file runner, topic/node introspection, the DDS transport profile and a test harness.
"""
