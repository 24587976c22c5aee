#!/usr/bin/env python3
"""Where one event's CPU goes, from `perf script` output of a `perf record -g` run.

    perf script -i FILE --pid PID -F comm,tid,period,ip,sym,dso | cpu-profile.py US_PER_EVENT [LABEL]

Reads the samples of AdTally's process (every thread), puts each sample's period in one part by
its stack (the first rule below that matches, walking from the leaf to the root), and prints a
Markdown table: each part's share of the process's samples and that share of US_PER_EVENT (the
process's measured CPU per event, from scripts/bench-ingest), then the same by thread.

The parts, in the order they are tried:
  kernel, by the system call on the stack: send/write (answers; on a committer, libpq's),
  read/recv, epoll, futex (wake-ups and waits), other kernel work (interrupts, scheduling);
  allocation (malloc, free, swift_allocObject, deallocation) and reference counting (swift_retain,
  swift_release and their bridge-object forms) wherever they are called from;
  libpq outside the kernel; libdispatch; Foundation; the C library's other functions;
  then AdTally's own code by the Swift module of the innermost frame that has one.
Swift symbols are kept mangled (`$s10HTTPServer...`): the module is the first length-prefixed name.
"""
import re
import sys
from collections import Counter, defaultdict

KERNEL_CALLS = [
    ("kernel: send/write", re.compile(r"__x64_sys_(sendto|sendmsg|write|writev)\b")),
    ("kernel: read/recv", re.compile(r"__x64_sys_(read|recvfrom|recvmsg|readv)\b")),
    ("kernel: epoll", re.compile(r"__x64_sys_epoll_(wait|pwait|ctl)")),
    ("kernel: futex (wake-ups, waits)", re.compile(r"__x64_sys_futex")),
    ("kernel: poll/ppoll (libpq waiting)", re.compile(r"__x64_sys_(poll|ppoll|select|pselect6)")),
]
ALLOC = re.compile(r"^(malloc|free|calloc|realloc|cfree|_int_malloc|_int_free|malloc_consolidate|tcache_|__libc_malloc|__libc_free|"
                   r"swift_allocObject|swift_deallocObject|swift_deallocClassInstance|swift_slowAlloc|swift_slowDealloc|_swift_release_dealloc|"
                   r"swift_allocBox|swift_deallocBox|_int_realloc|__GI___libc_malloc|__GI___libc_free|unlink_chunk)")
REFCOUNT = re.compile(r"^(swift_retain|swift_release|swift_bridgeObjectRetain|swift_bridgeObjectRelease|swift_unknownObjectRetain|"
                      r"swift_unknownObjectRelease|swift_nonatomic_|swift_isUniquelyReferenced|swift_beginAccess|swift_endAccess|"
                      r"_swift_retain_|_swift_release_|swift_retain_n|swift_release_n)")
SWIFT_MODULE = re.compile(r"^\$s(\d+)")


def module_of(sym):
    """The Swift module a mangled symbol belongs to, or None."""
    m = SWIFT_MODULE.match(sym)
    if not m:
        return None
    n = int(m.group(1))
    start = m.end()
    return sym[start:start + n] or None


def part_of(stack):
    """stack: [(sym, dso)], leaf first."""
    leaf_sym, leaf_dso = stack[0]
    if "kernel" in leaf_dso:
        syms = " ".join(s for s, _ in stack)
        in_libpq = any("libpq" in d for _, d in stack)
        for name, pattern in KERNEL_CALLS:
            if pattern.search(syms):
                if in_libpq and name in ("kernel: send/write", "kernel: read/recv"):
                    return "kernel: libpq's send/recv"
                return name
        return "kernel: other (interrupts, scheduling, page faults)"
    if ALLOC.match(leaf_sym):
        return "allocation and deallocation"
    if REFCOUNT.match(leaf_sym):
        return "reference counting"
    if "libpq" in leaf_dso:
        return "libpq (outside the kernel)"
    if "libdispatch" in leaf_dso:
        return "libdispatch"
    if "Foundation" in leaf_dso:
        return "Foundation"
    if "libswiftCore" in leaf_dso or "libswift" in leaf_dso:
        # The standard library: attribute to the nearest module of ours above it, if any.
        for sym, _ in stack[1:]:
            mod = module_of(sym)
            if mod and mod not in ("Swift", "Foundation", "Dispatch", "Synchronization"):
                return f"Swift standard library, for {mod}"
        return "Swift standard library"
    if "libc" in leaf_dso or "ld-linux" in leaf_dso:
        if leaf_sym.startswith(("__memmove", "__memcpy", "__memset", "__memcmp", "__strlen", "memmove", "memcpy", "memset", "memcmp")):
            return "memory copies (memcpy, memmove, memcmp)"
        return "C library, other"
    for sym, _ in stack:
        mod = module_of(sym)
        if mod and mod not in ("Swift",):
            return f"AdTally: {mod}"
    return f"other ({leaf_dso.rsplit('/', 1)[-1]})"


def thread_class(comm):
    if comm.startswith("adtally-commit"):
        return "committers"
    if comm.startswith("http-worker"):
        return "worker pool"
    if comm.startswith("http-io"):
        return "IO loops"
    if "qos" in comm or "dispatch" in comm.lower():
        return "Dispatch's threads (IO queues, before the IO loops)"
    if comm.startswith(("adtally-", "http-")):
        return comm
    return f"threads without a name of their own ({comm}: committers, before they were named)"


def samples(lines):
    header = None
    stack = []
    head = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\s*$")
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if header and stack:
                yield header, stack
            header, stack = None, []
            continue
        if not line.startswith((" ", "\t")):
            m = head.match(line)
            header = (m.group(1).strip(), int(m.group(3))) if m else None
            stack = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        dso = ""
        m = re.search(r"\(([^()]*)\)\s*$", rest)
        if m:
            dso = m.group(1)
            rest = rest[:m.start()].strip()
        sym = re.sub(r"\+0x[0-9a-f]+$", "", rest)
        stack.append((sym, dso))
    if header and stack:
        yield header, stack


def main():
    us = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    label = sys.argv[2] if len(sys.argv) > 2 else ""
    parts, threads = Counter(), Counter()
    by_thread = defaultdict(Counter)
    total = 0
    for (comm, period), stack in samples(sys.stdin):
        part = part_of(stack)
        tc = thread_class(comm)
        parts[part] += period
        threads[tc] += period
        by_thread[tc][part] += period
        total += period
    if total == 0:
        print("no samples of the process", file=sys.stderr)
        return 1
    print(f"Where one event's CPU goes{(' (' + label + ')') if label else ''}: {us:.1f} µs of AdTally's process per event")
    print()
    print("| part | share | µs per event |")
    print("| --- | ---: | ---: |")
    for part, p in parts.most_common():
        print(f"| {part} | {100 * p / total:.1f}% | {us * p / total:.1f} |")
    print()
    print("| thread | share | µs per event | its three largest parts |")
    print("| --- | ---: | ---: | --- |")
    for tc, p in threads.most_common():
        top = ", ".join(f"{name} {100 * v / p:.0f}%" for name, v in by_thread[tc].most_common(3))
        print(f"| {tc} | {100 * p / total:.1f}% | {us * p / total:.1f} | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
