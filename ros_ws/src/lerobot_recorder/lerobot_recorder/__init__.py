"""Records ROS 2 topics into LeRobot v3 datasets, converts rosbag2 bags, and owns the LeRobot v3 dataset format."""
