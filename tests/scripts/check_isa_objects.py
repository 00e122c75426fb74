#!/usr/bin/env python3
"""Checks that AVX2 code stays inside the *_avx2.cc object files of the portable build.

Usage: check_isa_objects.py OBJECT... (the object files of qwenserve_lib; an argument may hold
several paths separated by ';', as CMake's $<TARGET_OBJECTS:...> gives them).

Fails (exit 1, with the offending names) when
  1. a generic object (not *_avx2.cc) contains a VEX/EVEX-encoded instruction (v-prefixed
     mnemonic): generic code must run on baseline x86-64;
  2. an *_avx2.cc object defines a weak (COMDAT) function: an inline function or template from a
     shared header emitted out of line there. The linker keeps one copy of each weak function,
     possibly the AVX2 one, and generic callers would run AVX2 code on any CPU. (Weak data, such
     as DW.ref.__gxx_personality_v0, is no code and is allowed.)
  3. an *_avx2.cc object has static constructors (.init_array / .ctors): they run at start on
     every CPU.
Needs binutils (nm, objdump).
"""
import re
import subprocess
import sys

WEAK_CODE_TYPES = {"W", "i"}  # nm: weak function, indirect function


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def weak_functions(obj):
    defined_weak = set()
    for line in run(["nm", obj]).splitlines():
        parts = line.split()
        if len(parts) == 3:
            kind, name = parts[1], parts[2]
            if kind in WEAK_CODE_TYPES:
                defined_weak.add(name)
    return defined_weak


def vex_instructions(obj):
    found = []
    for line in run(["objdump", "-d", "--no-show-raw-insn", obj]).splitlines():
        m = re.match(r"\s+[0-9a-f]+:\s+(v[a-z0-9]+)\b", line)
        if m:
            found.append(m.group(1))
    return found


def main(objects):
    objects = [o for arg in objects for o in arg.split(";") if o.endswith(".o")]
    avx2 = [o for o in objects if re.search(r"_(avx2|avx512|avx512_vnni|avx512_bf16|amx)\.cc\.o$", o)]
    generic = [o for o in objects if o not in avx2]
    if not avx2:
        print("no *_avx2.cc objects given", file=sys.stderr)
        return 1
    failures = []
    for obj in generic:
        vex = vex_instructions(obj)
        if vex:
            failures.append(f"{obj}: {len(vex)} VEX/EVEX instructions in generic code, e.g. {sorted(set(vex))[:5]}")
    for obj in avx2:
        weak = weak_functions(obj)
        if weak:
            demangled = run(["c++filt"] + sorted(weak)[:10]).strip().split("\n")
            failures.append(f"{obj}: weak functions (may replace generic copies): {demangled}")
        sections = run(["objdump", "-h", obj])
        if ".init_array" in sections or ".ctors" in sections:
            failures.append(f"{obj}: has static constructors (.init_array/.ctors)")
    print(f"checked {len(generic)} generic and {len(avx2)} AVX2 objects")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
