#!/usr/bin/env python3
"""The folder layering of src/ (docs/ARCHITECTURE.md): a folder never includes a folder of a
higher layer, folders include each other without loops, and the engine, server and CLI reach the
CPU backend only through the backend factory.

Independent of the build: reads the #include lines of every source file under src/.
"""
import os
import re
import sys
import unittest

SRC = os.path.join(os.environ.get("QS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), "src")

# Layer of every folder, lowest first (docs/ARCHITECTURE.md). Sub-folders of backend/ are folders
# of their own.
LAYERS = {
    "core": 0, "formats": 1, "io": 2,
    "model": 3, "kv": 3, "tokenizer": 3, "sampling": 3,
    "backend": 4, "backend/cpu": 4, "backend/cuda": 4, "backend/factory": 4,
    "engine": 5, "chat": 5, "jinja": 5, "metrics": 5, "constrained": 5,
    "cli": 6, "server": 6, "loadtest": 6, "quantize": 6,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    parts = path.split("/")
    if parts[0] == "backend" and len(parts) > 2:
        return "backend/" + parts[1]
    return parts[0]


def include_edges():
    """(from_folder, to_folder, file, included) for every quoted include of another folder."""
    edges = []
    for root, _, files in os.walk(SRC):
        for name in files:
            if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, SRC).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for included in INCLUDE.findall(text):
                if "/" not in included:
                    continue
                a, b = folder_of(rel), folder_of(included)
                if a != b:
                    edges.append((a, b, rel, included))
    return edges


class Layers(unittest.TestCase):
    def test_every_folder_has_a_layer(self):
        folders = set()
        for root, _, files in os.walk(SRC):
            if any(f.endswith((".h", ".cc", ".cu", ".cuh")) for f in files):
                folders.add(folder_of(os.path.relpath(os.path.join(root, "x"), SRC).replace(os.sep, "/")))
        self.assertEqual(sorted(folders - set(LAYERS)), [], "folders missing from the layer table")

    def test_no_folder_includes_a_higher_layer(self):
        bad = [f"{rel} includes {inc} ({a}: layer {LAYERS[a]} -> {b}: layer {LAYERS[b]})"
               for a, b, rel, inc in include_edges() if LAYERS[b] > LAYERS[a]]
        self.assertEqual(bad, [])

    def test_folders_include_each_other_without_loops(self):
        graph = {}
        for a, b, _, _ in include_edges():
            graph.setdefault(a, set()).add(b)
        state = {}  # 1: on the DFS stack, 2: done

        def visit(node, stack):
            state[node] = 1
            for nxt in sorted(graph.get(node, ())):
                if state.get(nxt) == 1:
                    self.fail("folder loop: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
                if nxt not in state:
                    visit(nxt, stack + [nxt])
            state[node] = 2

        for node in sorted(graph):
            if node not in state:
                visit(node, [node])

    def test_engine_server_cli_reach_backends_only_through_the_factory(self):
        bad = [f"{rel} includes {inc}" for a, b, rel, inc in include_edges()
               if a in ("engine", "server", "cli") and b in ("backend/cpu", "backend/cuda")]
        self.assertEqual(bad, [])


if __name__ == "__main__":
    sys.exit(unittest.main())
