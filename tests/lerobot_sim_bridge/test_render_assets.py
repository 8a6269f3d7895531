"""Simplified render meshes: STL I/O, decimation, the cache stamp."""

import json
import shutil

import numpy as np

from lerobot_sim_bridge.so101 import render_assets


def test_stl_round_trip(tmp_path):
    vertices = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64)
    faces = np.array([[0, 1, 2], [0, 1, 3]])
    path = tmp_path / "mesh.stl"
    render_assets.write_stl(path, vertices, faces)
    triangles = render_assets.read_stl(path)
    np.testing.assert_allclose(triangles, vertices[faces], atol=1e-6)


def test_clustering_merges_close_vertices_and_drops_collapsed_faces():
    triangles = np.array(
        [
            [[0, 0, 0], [0.0001, 0, 0], [0, 1, 0]],  # collapses: two corners in one cell
            [[0, 0, 0], [1, 0, 0], [0, 1, 0]],
        ]
    )
    vertices, faces = render_assets.cluster_vertices(triangles, cell=0.01)
    assert len(faces) == 1
    assert len(vertices) == 3


def test_derived_meshes_are_much_smaller_and_cached(tmp_path, monkeypatch):
    # Two of the package's meshes keep this quick; the setup step derives all of them the same way.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("base_so101_v2.stl", "upper_arm_so101_v1.stl"):
        shutil.copy(render_assets.source_mesh_dir() / name, source / name)
    monkeypatch.setattr(render_assets, "source_mesh_dir", lambda: source)
    cache = tmp_path / "meshes"
    assert render_assets.derive_render_meshes(cache) == cache
    assert render_assets.is_current(cache)
    assert sorted(p.name for p in cache.glob("*.stl")) == ["base_so101_v2.stl", "upper_arm_so101_v1.stl"]
    assert render_assets.triangle_count(cache) < 0.15 * render_assets.triangle_count(source)
    # A stamp from another derivation makes the cache stale, and deriving again repairs it.
    stamp = json.loads((cache / render_assets.STAMP_FILE).read_text())
    stamp["algorithm"] = -1
    (cache / render_assets.STAMP_FILE).write_text(json.dumps(stamp))
    assert not render_assets.is_current(cache)
    render_assets.derive_render_meshes(cache)
    assert render_assets.is_current(cache)


def test_the_installed_cache_covers_every_package_mesh():
    cache = render_assets.derive_render_meshes()  # current after scripts/setup.sh: only checks the stamp
    source = render_assets.source_mesh_dir()
    assert sorted(p.name for p in cache.glob("*.stl")) == sorted(p.name for p in source.glob("*.stl"))
    assert render_assets.triangle_count(cache) < 0.1 * render_assets.triangle_count(source)
