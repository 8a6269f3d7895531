"""ROS 2 nodes: thin shells around the pure cores."""
