"""Views of a robot and of a dataset in Rerun (`lerobot-ros view`, `lerobot-ros dataset view`).

`entities` turns plain values (vectors, pictures, chunks, status fields, diagnostics) into Rerun entities,
and `episode` logs a dataset episode through it; neither imports rclpy. The live subscriber node is
`lerobot_recorder.nodes.viewer`; `sinks` opens the Rerun sink a command asked for (viewer, web, file).

Entity layout (the same for the live view and a dataset episode):

* ``cameras/<name>``: camera images (``observation.images.<name>``);
* ``joints/<name>/state``, ``joints/<name>/action``: per-joint time plots in dataset units;
* ``joints/<name>/chunk/current`` and ``.../previous``: the policy's chunks on the same plots;
* ``features/<key>/<name>``: other vector features (e.g. ``observation.environment_state``);
* ``recorder/...``: recorder state, episode boundaries, frames and drops;
* ``diagnostics/<node>/...``: every /diagnostics status (level, message, numeric values);
* ``view/topics``: per contract topic, messages seen so far (a topic that never publishes is listed as missing);
* ``task``, ``sync/...``: the task text and the bag2dataset sync report of a dataset episode.
"""
