#!/usr/bin/env python3
"""The runtime stage of deploy/Containerfile installs exactly the Debian packages that own the
shared libraries the qwenserve binary loads.

The libraries come from `ldd $QS_BIN` (the dynamic loader's own resolution, transitive
dependencies included), their owners from `dpkg -S`; the package list is the `apt-get install`
of the Containerfile's last stage. A missing package means the image would not start; an extra
one means the list is stale. The image itself cannot be built on this machine (no container
engine): this is the part of it that can be checked here.

A sanitizer build (its binary loads libasan / libubsan) is not what the image ships: the check is
skipped for it, with a message. In a build with the CUDA backend, the CUDA libraries (cuBLASLt)
are left out: the CPU image builds without CUDA.

Env: QS_BIN (the binary, default build/release/qwenserve), QS_SOURCE_DIR (repository root).
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(os.environ.get("QS_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("QS_BIN", REPO / "build" / "release" / "qwenserve"))
CONTAINERFILE = REPO / "deploy" / "Containerfile"


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def runtime_stage_packages(text):
    """Packages named by `apt-get install` in the last FROM stage (continuation lines joined)."""
    joined = re.sub(r"\\\n", " ", text)
    stages = re.split(r"^FROM\s", joined, flags=re.MULTILINE)
    last = stages[-1]
    packages = []
    for line in last.splitlines():
        if not line.startswith("RUN"):
            continue
        for command in re.split(r"&&|;", line[3:]):
            words = shlex.split(command)
            if "apt-get" in words and "install" in words:
                after = words[words.index("install") + 1:]
                packages += [w for w in after if not w.startswith("-") and "=" not in w]
    return packages


def linked_libraries(binary):
    """Resolved paths of every library `ldd` lists (the vDSO has none)."""
    out = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)\s+\(", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if not m:
            continue
        path = m.group(m.lastindex)
        if path == "not":
            fail(f"ldd cannot resolve {m.group(1)}")
        paths.append(path)
    return paths


def owning_package(path):
    """Debian package owning `path` (tried as given, then with symlinks resolved)."""
    for candidate in (path, os.path.realpath(path)):
        res = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if res.returncode == 0:
            return res.stdout.split(":")[0].strip()
    fail(f"no Debian package owns {path} (dpkg -S)")


def main():
    if not BIN.exists():
        fail(f"QS_BIN {BIN} does not exist")
    libraries = linked_libraries(BIN)
    if any(re.search(r"lib(asan|ubsan|tsan)\.so", p) for p in libraries):
        print(f"skipped: {BIN} is a sanitizer build; the image ships the release build")
        return
    # deploy/Containerfile has no CUDA toolkit, so its build is CPU-only (QS_CUDA=AUTO finds none):
    # the CUDA libraries a build with the CUDA backend loads (cuBLASLt from the toolkit) are the
    # concern of deploy/Containerfile.cuda, not of this image.
    cuda = [p for p in libraries if re.search(r"/lib(cublas|cublasLt|cudart)\.so", p)]
    for path in cuda:
        print(f"not in the CPU image (CUDA backend library): {path}")
    libraries = [p for p in libraries if p not in cuda]
    needed = {}
    for path in libraries:
        needed.setdefault(owning_package(path), []).append(os.path.basename(path))
    listed = runtime_stage_packages(CONTAINERFILE.read_text())
    if len(listed) != len(set(listed)):
        fail(f"a package is listed twice: {listed}")
    missing = sorted(set(needed) - set(listed))
    extra = sorted(set(listed) - set(needed))
    for package in sorted(needed):
        print(f"{package}: {', '.join(needed[package])}")
    if missing:
        fail(f"deploy/Containerfile's runtime stage lacks {missing}, which own libraries qwenserve loads: "
             + "; ".join(f"{p} ({', '.join(needed[p])})" for p in missing))
    if extra:
        fail(f"deploy/Containerfile's runtime stage installs {extra}, which own no library qwenserve loads")
    print(f"ok: the runtime stage installs exactly the {len(needed)} packages of the {len(libraries)} "
          "libraries ldd lists")


if __name__ == "__main__":
    main()
