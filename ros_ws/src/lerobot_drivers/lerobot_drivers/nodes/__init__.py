"""ROS 2 nodes of lerobot_drivers (thin shells around the pure cores)."""
