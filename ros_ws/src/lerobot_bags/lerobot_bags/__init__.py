"""rosbag2 bags and LeRobot v3 datasets, without a ROS installation for everything but playback.

`reader` reads bags (mcap, sqlite3, compressed) with their message definitions; `pipeline` and `convert` turn bags
into a dataset (`lerobot-ros bag2dataset`), `export` a dataset into a bag (`dataset2bag`), `fleet` many robots' bags
into one dataset with a sync report; `play` and `nodes.bag_player` publish a bag onto a live graph
(`lerobot-ros bag play`). Datasets are written with `lerobot_dataset`.
"""
