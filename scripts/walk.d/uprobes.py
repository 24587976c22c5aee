#!/usr/bin/env python3
# The uprobes of scripts/walk, in tracefs: one event, GROUP:entry, with a probe at the entry of
# every function of the functions table (one event of many probes: perf opens it once per CPU, and
# taking it down waits for one RCU grace period, where an event per function would wait for one
# each, minutes for the lot).
#   uprobes.py add GROUP BINARY TABLE   defines the event (and first removes the events that runs
#                                       killed before their cleanup left: groups adtally_walk_PID
#                                       of a process that is gone)
#   uprobes.py remove GROUP             removes it (quiet when it is not there)
import os
import re
import sys

STALE = re.compile(r"^adtally_walk_(\d+)$")


def tracefs():
    for path in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.exists(os.path.join(path, "uprobe_events")):
            return path
    # Not mounted (a fresh VM or container): mount it where the kernel expects it.
    if os.path.isdir("/sys/kernel/tracing") and os.system("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0 \
            and os.path.exists("/sys/kernel/tracing/uprobe_events"):
        return "/sys/kernel/tracing"
    sys.exit("walk: no tracefs with uprobe_events (a kernel with CONFIG_UPROBE_EVENTS, and root, are needed)")


def events(path):
    with open(os.path.join(path, "uprobe_events")) as f:
        return [line.split()[0].split(":", 1)[1] for line in f if line.strip()]


def remove(path, group):
    names = sorted({name for name in events(path) if name.split("/")[0] == group})
    if not names:
        return
    fd = os.open(os.path.join(path, "uprobe_events"), os.O_WRONLY | os.O_APPEND)
    try:
        for name in names:
            try:
                os.write(fd, ("-:%s\n" % name).encode())
            except OSError as error:
                print("walk: could not remove the uprobe event %s: %s" % (name, error), file=sys.stderr)
    finally:
        os.close(fd)


def main():
    path = tracefs()
    if sys.argv[1] == "remove":
        remove(path, sys.argv[2])
        return
    group, binary, table = sys.argv[2:5]
    for stale in {name.split("/")[0] for name in events(path)}:
        match = STALE.match(stale)
        if match and not os.path.exists("/proc/%s" % match.group(1)):
            remove(path, stale)
    remove(path, group)
    binary = os.path.realpath(binary)
    fd = os.open(os.path.join(path, "uprobe_events"), os.O_WRONLY | os.O_APPEND)  # tracefs refuses a seek
    count = 0
    try:
        with open(table) as rows:
            next(rows)
            for row in rows:
                offset = row.split("\t", 3)[2]
                os.write(fd, ("p:%s/entry %s:0x%s\n" % (group, binary, offset)).encode())
                count += 1
    finally:
        os.close(fd)
    print(count)


main()
