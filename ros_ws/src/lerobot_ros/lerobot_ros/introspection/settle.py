"""When a graph listing may answer: the graph has settled (pure, no rclpy; times in seconds).

DDS discovery is incremental: a participant, then its endpoints, then its node announcement arrive one by one,
and when the first exchange with a remote participant is missed (a busy machine), that participant is only
seen at its next periodic announcement. A listing that answers at a fixed time after start-up therefore misses
whatever is late. The rule here: answer once nothing in the graph (nodes, endpoints) has changed for
`quiet_s` (longer than the DDS announcement period, so a participant whose first exchange was missed has
announced itself again in that window), the graph holds another node than ours (a graph holding only us is
given `empty_extra_s` more) and no endpoint belongs to a node not yet announced (given `unknown_extra_s`
more); never before `min_s` and never after `max_s` (a graph that keeps changing still gets an answer).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

# The DDS profile (config/fastdds_shm.xml) announces every participant every 1 s; a quiet window longer than
# that, with margin for a loaded machine, means a participant that announced since is in the graph.
QUIET_S = 1.5
EMPTY_GRAPH_EXTRA_S = 3.0
UNKNOWN_NODE_EXTRA_S = 3.0
MAX_WAIT_S = 10.0


@dataclass
class GraphSettle:
    """Feed `observe(now, snapshot, ...)` with graph snapshots; it says when the listing may answer."""

    min_s: float
    quiet_s: float = QUIET_S
    empty_extra_s: float = EMPTY_GRAPH_EXTRA_S
    unknown_extra_s: float = UNKNOWN_NODE_EXTRA_S
    max_s: float = MAX_WAIT_S
    _last: Hashable | None = field(default=None, init=False)
    _changed_at: float = field(default=0.0, init=False)
    reason: str = field(default="", init=False)

    def observe(self, now: float, snapshot: Hashable, *, other_nodes: bool, unknown_nodes: bool) -> bool:
        """True when the listing may answer at `now` (s since start); `reason` says what it still waits for."""
        if snapshot != self._last:
            self._last = snapshot
            self._changed_at = now
        limit = max(self.min_s, self.max_s)
        if now >= limit:
            self.reason = f"the graph still changed after {limit:g} s"
            return True
        if now < self.min_s:
            self.reason = "spin time"
            return False
        if now - self._changed_at < self.quiet_s:
            self.reason = "the graph changed in the last discovery period"
            return False
        if not other_nodes and now < self.min_s + self.empty_extra_s:
            self.reason = "no other node seen yet"
            return False
        if unknown_nodes and now < self.min_s + self.unknown_extra_s:
            self.reason = "an endpoint's node is not announced yet"
            return False
        self.reason = ""
        return True
