#!/usr/bin/env python3
# The numbers of scripts/walk, from perf's samples of the entry uprobe: for each window, the walk
# (the product's functions entered, in order, by the activations a request caused), then the files
# and folders of that walk. Prints the summary and writes the full walks beside the data.
#
# Each sample is a function entry with the thread's user stack (frame pointers: the binary, the
# standard library, Foundation and Dispatch all keep them). An activation is one run of the
# product's code on one thread, named by the outermost functions of Sources/ on its stack (what
# Dispatch or Foundation's Thread called): an entry with no other function of Sources/ on its stack
# starts one; the others belong to their thread's current activation.
# Usage: analyze.py FUNCTIONS_TSV PERF_DATA BINARY SERVER_PID WINDOWS_JSON OUTPUT_DIR
import bisect
import collections
import json
import os
import re
import subprocess
import sys

table_path, perf_data, binary, server_pid, windows_path, out_dir = sys.argv[1:7]
binary = os.path.realpath(binary)
server_pid = int(server_pid)
ROOT_DEPTH = 4  # the outermost functions of Sources/ that name an activation

# Activations that are not caused by a request: periodic work of the process, recognised by a
# function among the outermost ones on their stack or among those they enter. The control window
# (no request) shows whether anything else runs by itself; it should keep nothing.
BACKGROUND = [
    (re.compile(r"\bIOLoop\.sweep\("), "IO queues' timer sweep (HTTPServer, every sweepInterval)"),
    (re.compile(r"\bEventIngestor\.runWatchdog\("), "group commit's watchdog (every 250 ms)"),
    (re.compile(r"\bMaintenanceScheduler\.loop\("), "maintenance scheduler's heartbeat (every 5 s)"),
    (re.compile(r"\bShardRouter\b"), "Citus shard map refresher"),
]
ADTALLY = "Sources/AdTally/"

starts, ends, files, names = [], [], [], []
with open(table_path) as table:
    next(table)
    for line in table:
        address, size, _, path, name = line.rstrip("\n").split("\t", 4)
        starts.append(int(address, 16))
        ends.append(int(address, 16) + max(1, int(size)))
        files.append(path)
        names.append(name)
order = sorted(range(len(starts)), key=starts.__getitem__)
sorted_starts = [starts[i] for i in order]


def function_at(address):
    """Number of the table's function whose code holds address (in the binary), or -1."""
    k = bisect.bisect_right(sorted_starts, address) - 1
    if k >= 0 and address < ends[order[k]]:
        return order[k]
    return -1


with open(windows_path) as f:
    windows = {w["window"]: w for w in json.load(f)}


def window_of(t):
    for number, w in windows.items():
        if w["opened"] <= t <= w["closed"]:
            return number
    return None


# perf script: a line per sample (pid/tid and time), then its stack, innermost first, one
# "<tab>address (dso)" line each; the address is the DSO's own (as in its symbol table).
script = subprocess.Popen(["perf", "script", "-i", perf_data, "-F", "pid,tid,time,ip,dso", "--ns"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
hits = collections.defaultdict(list)   # window -> [(time, activation, function)]
activations = {}                        # activation -> (tid, [root functions])
current = {}                            # tid -> (activation, outermost function)
other_processes = 0
outside = 0


def sample(header, stack):
    global other_processes, outside
    ids, t = header.split()[:2]
    pid, tid = (int(n) for n in ids.split("/"))
    if pid != server_pid:
        other_processes += 1
        return
    number = window_of(float(t.rstrip(":")))
    if number is None:
        outside += 1
        return
    frames = []
    for address, dso in stack:
        if dso == binary:
            function = function_at(address)
            if function >= 0:
                frames.append(function)
    if not frames or starts[frames[0]] != stack[0][0]:
        sys.exit("walk: a sample at 0x%x is not the entry of a traced function" % stack[0][0])
    outer = frames[::-1]
    here = current.get(tid)
    if len(frames) == 1 or here is None or here[1] != outer[0]:
        activation = len(activations) + 1
        activations[activation] = (tid, outer[:ROOT_DEPTH])
        current[tid] = here = (activation, outer[0])
    hits[number].append((float(t.rstrip(":")), here[0], frames[0]))


real = {}   # a DSO as perf names it -> its real path
header, stack = None, []
for line in script.stdout:
    if line.startswith("\t"):
        address, _, dso = line.strip().partition(" ")
        if dso not in real:
            real[dso] = os.path.realpath(dso[1:-1]) if dso.startswith("(/") else dso
        stack.append((int(address, 16), real[dso]))
    elif line.strip():
        if header:
            sample(header, stack)
        header, stack = line, []
if header:
    sample(header, stack)
if script.wait() != 0:
    sys.exit("walk: perf script failed")
entered = collections.defaultdict(set)   # activation -> functions it entered
for window_hits in hits.values():
    for _, activation, function in window_hits:
        entered[activation].add(function)


def background(activation):
    for function in list(activations[activation][1]) + sorted(entered[activation]):
        for pattern, reason in BACKGROUND:
            if pattern.search(names[function]):
                return reason
    return None


def folder(path, modules):
    """The first-level folder: Sources/AdTally/X for AdTally's files; with modules, Sources/M
    for the other modules' (without, None: not counted)."""
    parts = path.split("/")
    if path.startswith(ADTALLY):
        return "/".join(parts[:3]) if len(parts) > 3 else "Sources/AdTally"
    return "/".join(parts[:2]) if modules else None


def short(name):
    return name.replace("Sources/AdTally/", "").replace("Sources/", "")


def runs(sequence):
    """Maximal runs of equal consecutive items."""
    out = []
    for item in sequence:
        if not out or out[-1] != item:
            out.append(item)
    return out


def measure(path_sequence, modules):
    """Counts of one view: the files (AdTally's, or every module's) in order."""
    chosen = [p for p in path_sequence if folder(p, modules) is not None]
    file_runs = runs(chosen)
    folder_runs = runs([folder(p, modules) for p in file_runs])
    per_folder = collections.Counter(folder_runs)
    pairs = collections.Counter(tuple(sorted(pair)) for pair in zip(folder_runs, folder_runs[1:]))
    return {
        "files": file_runs,
        "distinct_files": len(set(chosen)),
        "distinct_folders": len(per_folder),
        "folder_runs": len(folder_runs),
        "crossings": max(0, len(folder_runs) - 1),
        "revisited": {f: n - 1 for f, n in per_folder.most_common() if n > 1},
        "pairs": pairs.most_common(),
        "folder_sequence": folder_runs,
    }


def describe(m, whole=None):
    lines = ["    %d distinct files, %d distinct folders, %d folder runs, %d crossings"
             % (m["distinct_files"], m["distinct_folders"], m["folder_runs"], m["crossings"])]
    if whole is not None and whole["crossings"] != m["crossings"]:
        lines[0] += " (%d with each activation kept whole)" % whole["crossings"]
    if m["revisited"]:
        lines.append("    folders left and come back to: " + ", ".join(
            "%s %dx" % (short(f), n) for f, n in m["revisited"].items()))
    else:
        lines.append("    no folder is left and come back to")
    if m["pairs"]:
        lines.append("    crossings by pair: " + ", ".join(
            "%s <-> %s %d" % (short(a), short(b), n) for (a, b), n in m["pairs"]))
    return lines


summary = [os.environ["WALK_LABEL"]] if os.environ.get("WALK_LABEL") else []
if other_processes or outside:
    summary.append("(ignored: %d entries in other processes running this binary, %d outside the windows)"
                   % (other_processes, outside))
results = {}
for number in sorted(windows):
    w = windows[number]
    all_hits = sorted(hits.get(number, []))
    verdicts = {a: background(a) for a in {h[1] for h in all_hits}}
    kept = [h for h in all_hits if verdicts[h[1]] is None]
    dropped = collections.Counter(verdicts[h[1]] for h in all_hits if verdicts[h[1]] is not None)
    used = []
    for _, activation, _ in kept:
        if activation not in used:
            used.append(activation)
    # Interleavings: the walk goes back to an activation after another one ran (threads at work at
    # the same time); with none, the order is that of the activations one after another.
    interleavings = 0
    seen, previous = set(), None
    for _, activation, _ in kept:
        if activation != previous:
            if activation in seen:
                interleavings += 1
            seen.add(activation)
            previous = activation
    paths = [files[f] for _, _, f in kept]
    adtally = measure(paths, modules=False)
    every = measure(paths, modules=True)
    # The same walk with each activation kept whole, in the order they started: what the counts are
    # whatever the scheduling of the threads that ran at once.
    whole = [files[f] for a in used for _, b, f in kept if b == a]
    whole_adtally = measure(whole, modules=False)
    whole_every = measure(whole, modules=True)
    results[w["key"]] = {"label": w["label"], "entries": len(kept), "background_entries": dict(dropped),
                         "activations": len(used), "interleavings": interleavings,
                         "answered_seconds": w["answered_seconds"],
                         "adtally": {k: v for k, v in adtally.items() if k != "folder_sequence"},
                         "all_modules": {k: v for k, v in every.items() if k != "folder_sequence"},
                         "activations_whole": {
                             "adtally": {k: v for k, v in whole_adtally.items() if k not in ("folder_sequence", "files")},
                             "all_modules": {k: v for k, v in whole_every.items() if k not in ("folder_sequence", "files")}}}

    head = "%s: %d function entries of Sources/ in %d activations on %d threads" % (
        w["label"], len(kept), len(used), len({activations[a][0] for a in used}))
    if w["answered_seconds"] is not None:
        head += "; answered in %.1f ms" % (w["answered_seconds"] * 1000)
    summary.append(head)
    if dropped:
        summary.append("  left out as background: " + "; ".join("%d entries of the %s" % (n, r) for r, n in dropped.items()))
    if interleavings:
        summary.append("  note: %d times the walk goes back to an activation after another one ran (threads at work at once)"
                       % interleavings)
    if w["key"] == "control":
        if kept:
            summary.append("  WARNING: %d entries with no request in flight were kept (background not recognised): %s" % (
                len(kept), "; ".join(" > ".join(names[f] for f in activations[a][1]) for a in used)))
        else:
            summary.append("  nothing kept: every entry without a request is recognised as background")
        summary.append("")
        continue
    for activation in used:
        tid, root = activations[activation]
        own = [files[h[2]] for h in kept if h[1] == activation]
        summary.append("  a%d, thread %d, %d entries in %d files (%d of Sources/AdTally): %s" % (
            activation, tid, len(own), len(set(own)), len({p for p in own if p.startswith(ADTALLY)}),
            " > ".join(names[f] for f in root)))
    summary.append("  Sources/AdTally (folders: its first-level folders; the other modules skipped):")
    summary.extend(describe(adtally, whole_adtally))
    summary.append("    files in order: " + " > ".join(short(p) for p in adtally["files"]))
    summary.append("  every module (folders: AdTally's first-level folders and Sources/<module>):")
    summary.extend(describe(every, whole_every))
    summary.append("")

    # The full walk: every entry, and the activations.
    with open(os.path.join(out_dir, "walk-%s.txt" % w["key"]), "w") as out:
        out.write("# %s\n# activations (thread, outermost functions of Sources/ on its stack):\n" % w["label"])
        for activation in used:
            tid, root = activations[activation]
            out.write("#   a%d: thread %d: %s\n" % (activation, tid, " > ".join(names[f] for f in root)))
        if dropped:
            out.write("# left out as background: %s\n" % json.dumps(dict(dropped)))
        out.write("# files of Sources/AdTally in order (consecutive repeats collapsed):\n")
        for p in adtally["files"]:
            out.write("#   %s\n" % p)
        out.write("# files of every module in order (consecutive repeats collapsed):\n")
        for p in every["files"]:
            out.write("#   %s\n" % p)
        out.write("# folders of every module in order:\n#   %s\n" % " > ".join(short(f) for f in every["folder_sequence"]))
        out.write("# every function entry: time (CLOCK_MONOTONIC, s), activation, file, function\n")
        for t, activation, function in kept:
            out.write("%.9f\ta%d\t%s\t%s\n" % (t, activation, files[function], names[function]))

with open(os.path.join(out_dir, "walk.json"), "w") as out:
    json.dump(results, out, indent=1)
with open(os.path.join(out_dir, "summary.txt"), "w") as out:
    out.write("\n".join(summary) + "\n")
print("\n".join(summary))
