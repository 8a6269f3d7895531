"""A scripted pusher for gym-pusht: choose a contact point on the T, walk around the T to it, push.

Units are the env's pixels (512x512 frame) and radians. Every tick the contact points along the T's outline
are scored by how much a push there would reduce the position error of the T's centre of mass and its angle
error; the pusher walks to the best reachable one's approach point along a collision-free path (a shortest
path over via points off the T's corners, checked against the T's two rectangles and the walls), then
pushes through the contact toward the inside of the T, more gently as the T nears the goal.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping

import numpy as np

from lerobot_sim_bridge.adapters.base import FloatArray, ObjectPose
from lerobot_sim_bridge.errors import InvalidConfigError

GOAL_POSE = (256.0, 256.0, math.pi / 4)  # gym-pusht's fixed goal: body x, y, angle
# T geometry of gym-pusht (`add_tee`, scale 30), body frame: two rectangles and the centre of mass.
RECTANGLES = ((-60.0, 0.0, 60.0, 30.0), (-15.0, 30.0, 15.0, 120.0))
COM_BODY = np.array([0.0, 45.0])


# Contact points every 10 px along the T's outline with their outward normals, body frame.
def _outline() -> tuple[tuple[tuple[float, float], tuple[float, float]], ...]:
    edges = (
        ((-60.0, 0.0), (60.0, 0.0), (0.0, -1.0)),  # top of the crossbar
        ((60.0, 0.0), (60.0, 30.0), (1.0, 0.0)),
        ((60.0, 30.0), (15.0, 30.0), (0.0, 1.0)),
        ((15.0, 30.0), (15.0, 120.0), (1.0, 0.0)),
        ((15.0, 120.0), (-15.0, 120.0), (0.0, 1.0)),
        ((-15.0, 120.0), (-15.0, 30.0), (-1.0, 0.0)),
        ((-15.0, 30.0), (-60.0, 30.0), (0.0, 1.0)),
        ((-60.0, 30.0), (-60.0, 0.0), (-1.0, 0.0)),
    )
    points = []
    for (x0, y0), (x1, y1), normal in edges:
        length = float(np.hypot(x1 - x0, y1 - y0))
        count = max(int(length // CONTACT_SPACING), 1)
        for k in range(count):
            f = (k + 0.5) / count
            points.append(((x0 + f * (x1 - x0), y0 + f * (y1 - y0)), normal))
    return tuple(points)


CONTACT_SPACING = 15.0
CONTACTS = _outline()
# Via points for walking around the T (body frame): off its eight outer corners.
WAYPOINTS_BODY = np.array(
    [
        (-85.0, -25.0),
        (85.0, -25.0),
        (85.0, 55.0),
        (-85.0, 55.0),
        (40.0, 145.0),
        (-40.0, 145.0),
        (40.0, 80.0),
        (-40.0, 80.0),
    ]
)
AGENT_RADIUS = 15.0
APPROACH_DISTANCE = 22.0
PUSH_DEPTH = 20.0
MIN_PUSH_DEPTH = 1.0
ARENA = (24.0, 488.0)  # reachable range of the pusher's centre (walls at 5 and 506, radius 2)
ARRIVAL_TOLERANCE = 6.0
SLIP_DISTANCE = 40.0
PATH_SAMPLE = 4.0
START_SLACK = 12.0
ROTATION_WEIGHT = 1.0
TRANSLATION_SPAN = 30.0
ROTATION_SPAN = 1.0
HYSTERESIS = 0.25
BAN_TICKS = 15
STUCK_TICKS = 30


def _rotation(angle: float) -> FloatArray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def _in_frame(point: FloatArray) -> FloatArray:
    return np.asarray(np.clip(point, 0.0, 512.0), dtype=np.float64)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def distance_to_tee(points_body: FloatArray) -> FloatArray:
    """Distance of body-frame points `(n, 2)` to the T (0 inside)."""
    best = np.full(len(points_body), np.inf)
    for x0, y0, x1, y1 in RECTANGLES:
        dx = np.maximum(np.maximum(x0 - points_body[:, 0], points_body[:, 0] - x1), 0.0)
        dy = np.maximum(np.maximum(y0 - points_body[:, 1], points_body[:, 1] - y1), 0.0)
        best = np.minimum(best, np.hypot(dx, dy))
    return best


class PushTExpert:
    """Heuristic PushT expert; `reset()` at every episode start."""

    def __init__(self) -> None:
        self._contact: int | None = None
        self._pushing = False
        self._banned: dict[int, int] = {}
        self._ticks_on_contact = 0

    @property
    def object_names(self) -> tuple[str, ...]:
        """Task objects in `sim/object_poses` order."""
        return ("block",)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The pusher's target coordinates."""
        return ("agent_x", "agent_y")

    def reset(self) -> None:
        """Start a new episode."""
        self._contact = None
        self._pushing = False
        self._banned = {}
        self._ticks_on_contact = 0

    def act(self, joint_positions: FloatArray, objects: Mapping[str, ObjectPose]) -> FloatArray:
        """The pusher target for this observation; needs the `block` pose (x, y in pixels, yaw)."""
        if "block" not in objects:
            raise InvalidConfigError(f"PushT expert needs the 'block' pose; got {sorted(objects)}")
        agent = np.asarray(joint_positions, dtype=np.float64)[:2]
        block = objects["block"]
        w, _, _, z = block.orientation
        angle = 2.0 * math.atan2(z, w)
        rot = _rotation(angle)
        position = np.array(block.position[:2])
        com = position + rot @ COM_BODY
        goal_com = np.array(GOAL_POSE[:2]) + _rotation(GOAL_POSE[2]) @ COM_BODY
        error = goal_com - com
        distance = float(np.linalg.norm(error))
        angle_error = _wrap(GOAL_POSE[2] - angle)
        self._banned = {k: v - 1 for k, v in self._banned.items() if v > 1}
        # Push gently near the goal so the T does not overshoot.
        depth = float(np.clip(0.3 * distance + 20.0 * abs(angle_error), MIN_PUSH_DEPTH, PUSH_DEPTH))

        contacts = [position + rot @ np.array(p) for p, _ in CONTACTS]
        outwards = [rot @ np.array(n) for _, n in CONTACTS]
        approaches = [c + n * APPROACH_DISTANCE for c, n in zip(contacts, outwards, strict=True)]

        def free(a: FloatArray, b: FloatArray) -> bool:
            count = max(int(np.linalg.norm(b - a) / PATH_SAMPLE), 1) + 1
            samples = np.linspace(a, b, count)
            if np.any(samples < ARENA[0]) or np.any(samples > ARENA[1]):
                return False
            # The pusher may touch the T where it stands (it was pushing): only leaving must be free.
            samples = samples[np.linalg.norm(samples - a, axis=1) > START_SLACK] if a is agent else samples
            body = (samples - position) @ rot  # world -> body frame
            return bool(np.all(distance_to_tee(body) > AGENT_RADIUS + 1.0))

        scores = []
        for index in range(len(CONTACTS)):
            push = -outwards[index]
            arm = contacts[index] - com
            torque = (arm[0] * push[1] - arm[1] * push[0]) / max(float(np.linalg.norm(arm)), 1.0)
            score = float(push @ error) / max(distance, 1.0) * min(distance / TRANSLATION_SPAN, 1.0)
            score += ROTATION_WEIGHT * torque * float(np.clip(angle_error / ROTATION_SPAN, -1.0, 1.0))
            if index == self._contact:
                score += HYSTERESIS
            scores.append(score)

        for index in sorted(range(len(CONTACTS)), key=lambda i: -scores[i]):
            if index in self._banned:
                continue
            if self._pushing and index == self._contact:
                if float(np.linalg.norm(agent - contacts[index])) < SLIP_DISTANCE:
                    return _in_frame(contacts[index] - outwards[index] * depth)
                self._pushing = False
            if float(np.linalg.norm(agent - approaches[index])) < ARRIVAL_TOLERANCE:
                self._select(index)
                self._pushing = True
                return _in_frame(contacts[index] - outwards[index] * depth)
            vias = [position + rot @ p for p in WAYPOINTS_BODY]
            waypoint = self._first_waypoint(agent, [*vias, approaches[index]], len(vias), free)
            if waypoint is None:
                continue
            self._select(index)
            self._ticks_on_contact += 1
            if self._ticks_on_contact > STUCK_TICKS:
                self._banned[index] = BAN_TICKS
                self._ticks_on_contact = 0
            return _in_frame(waypoint)
        # Nothing reachable: back away from the T's centre and try again next tick.
        away = agent - com
        return _in_frame(agent + away / max(float(np.linalg.norm(away)), 1e-6) * 20.0)

    def _select(self, index: int) -> None:
        if index != self._contact:
            self._contact, self._pushing, self._ticks_on_contact = index, False, 0

    @staticmethod
    def _first_waypoint(
        agent: FloatArray, approaches: list[FloatArray], goal: int, free: Callable[[FloatArray, FloatArray], bool]
    ) -> FloatArray | None:
        """First point of the shortest collision-free path agent -> approaches[goal] through approach points."""
        nodes = [agent, *approaches]
        target = goal + 1
        best = {0: 0.0}
        previous: dict[int, int] = {}
        queue = [(0.0, 0)]
        while queue:
            cost, node = heapq.heappop(queue)
            if node == target:
                break
            if cost > best.get(node, math.inf):
                continue
            for other in range(1, len(nodes)):
                if other == node:
                    continue
                step = float(np.linalg.norm(nodes[other] - nodes[node]))
                if cost + step < best.get(other, math.inf) and free(nodes[node], nodes[other]):
                    best[other] = cost + step
                    previous[other] = node
                    heapq.heappush(queue, (cost + step, other))
        if target not in best:
            return None
        node = target
        while previous[node] != 0:
            node = previous[node]
        return nodes[node]
