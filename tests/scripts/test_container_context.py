#!/usr/bin/env python3
"""The build stage of deploy/Containerfile gets everything CMake needs.

Copies exactly what the build stage's COPY instructions bring into the image (relative to the
repository root, the build context) into an empty directory and runs the stage's own `cmake -S .`
configure command there (its -G / -D flags, our build directory instead of /build), then requires
the targets qwenserve and qwenserve_web (the embedded web UI, which CMake treats as optional). A
folder the build needs but the Containerfile does not copy makes this fail, as `podman build`
would. Paths excluded by .containerignore / .dockerignore must not be copied.

Only the configure step runs (seconds); compiling is what CI's own build already does.

Env: QS_SOURCE_DIR (repository root).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(os.environ.get("QS_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CONTAINERFILE = REPO / "deploy" / "Containerfile"


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def build_stage(text):
    """Instructions (continuation lines joined) of the first stage, up to the next FROM."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    if not lines or not lines[0].startswith("FROM"):
        fail("the Containerfile does not start with FROM")
    stage = [lines[0]]
    for line in lines[1:]:
        if line.startswith("FROM"):
            break
        stage.append(line)
    return stage


def main():
    stage = build_stage(CONTAINERFILE.read_text())
    copies = []
    configure = None
    for line in stage:
        words = shlex.split(line)
        if words[0] == "COPY":
            if any(w.startswith("--from") for w in words):
                continue
            *sources, dest = words[1:]
            copies += [(s, dest) for s in sources]
        elif words[0] == "RUN" and "cmake" in words and "-S" in words:
            start = words.index("cmake")
            end = words.index("&&", start) if "&&" in words[start:] else len(words)
            configure = words[start:end]
    if not copies or configure is None:
        fail("no COPY or no `cmake -S` configure step in the build stage")
    ignored = set()
    for name in (".containerignore", ".dockerignore"):
        path = REPO / name
        if path.exists():
            ignored |= {l.strip().rstrip("/") for l in path.read_text().splitlines() if l.strip()}
    with tempfile.TemporaryDirectory(prefix="qs-context-") as tmp:
        root = Path(tmp) / "src"  # the WORKDIR; COPY destinations are relative to it
        root.mkdir()
        for source, dest in copies:
            if source.rstrip("/") in ignored:
                fail(f"COPY {source}: excluded from the build context by an ignore file")
            src = REPO / source
            if not src.exists():
                fail(f"COPY {source}: no such path in the repository")
            target = root / dest
            if src.is_dir():  # a directory's contents go into the destination directory
                shutil.copytree(src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("node_modules"))
            elif dest.endswith("/") or dest in (".", "./"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / src.name)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
        build_dir = Path(tmp) / "build"
        command = [w if w != "/build" else str(build_dir) for w in configure]
        res = subprocess.run(command, cwd=root, capture_output=True, text=True)
        if res.returncode != 0:
            fail(f"{' '.join(command)} failed in a copy of the build context:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
        targets = subprocess.run(["ninja", "-C", str(build_dir), "-t", "targets", "all"], capture_output=True,
                                 text=True).stdout  # the stage configures with -G Ninja
        for target in ("qwenserve", "qwenserve_web"):  # the server and its embedded web UI
            if not re.search(rf"^{target}:", targets, flags=re.MULTILINE):
                fail(f"the configured build has no target {target} (is a folder missing from the COPY list?)")
        print(f"ok: `{' '.join(configure)}` configures with only the {len(copies)} COPY sources of the build stage")


if __name__ == "__main__":
    main()
