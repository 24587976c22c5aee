#!/usr/bin/env python3
# The functions table of scripts/walk: every function of BINARY whose DWARF subprogram says its
# source file is under ROOT/Sources/ (llvm-symbolizer's StartFileName: the file of DW_AT_decl_file
# of the subprogram at the symbol's address; the line table could name another file at the entry).
# Functions the compiler makes up (thunks, witnesses, value witnesses, outlined copies, stored
# properties' accessors, derived Equatable/Hashable, metadata accessors) have no file there and are
# left out. Writes a TSV: address (as in the binary's symbol table), size, offset in the file (what
# a uprobe names), file relative to ROOT, demangled name.
# Usage: functions.py BINARY ROOT OUTPUT
import json
import os
import shutil
import subprocess
import sys

binary, root, output = sys.argv[1:4]
root = os.path.realpath(root)
sources = os.path.join(root, "Sources") + "/"


def tool(name):
    """A tool of the Swift toolchain (next to swift), else from PATH."""
    swift = shutil.which("swift")
    if swift:
        candidate = os.path.join(os.path.dirname(os.path.realpath(swift)), name)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if not found:
        sys.exit("walk: %s not found (it comes with the Swift toolchain)" % name)
    return found


# Text symbols with a size: address, size, type, name.
symbols = {}
nm = subprocess.run(["nm", "-S", "--defined-only", binary], check=True, capture_output=True, text=True).stdout
for line in nm.splitlines():
    parts = line.split(None, 3)
    if len(parts) == 4 and parts[2] in ("t", "T"):
        address, size = int(parts[0], 16), int(parts[1], 16)
        if size > 0 and address not in symbols:
            symbols[address] = (size, parts[3])

# Where each loaded segment's bytes are in the file: a uprobe is set at a file offset.
segments = []
headers = subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True, text=True).stdout
for line in headers.splitlines():
    parts = line.split()
    if parts and parts[0] == "LOAD":
        segments.append((int(parts[2], 16), int(parts[1], 16), int(parts[4], 16)))  # address, offset, size in file


def file_offset(address):
    for start, offset, size in segments:
        if start <= address < start + size:
            return address - start + offset
    sys.exit("walk: address 0x%x of %s is in no loaded segment" % (address, binary))


addresses = sorted(symbols)
answer = subprocess.run([tool("llvm-symbolizer"), "--obj=" + binary, "--no-inlines", "--output-style=JSON"],
                        input="".join("0x%x\n" % a for a in addresses), check=True, capture_output=True, text=True).stdout
kept = []
for address, line in zip(addresses, answer.splitlines()):
    entry = json.loads(line)["Symbol"][0]
    path = entry.get("StartFileName") or ""
    if path.startswith(sources):
        kept.append((address, symbols[address][0], os.path.relpath(path, root), symbols[address][1]))
if not kept:
    sys.exit("walk: no function of %s has its file under %s (no debug info?)" % (binary, sources))

demangled = subprocess.run([tool("swift-demangle"), "--simplified"], input="".join(k[3] + "\n" for k in kept),
                           check=True, capture_output=True, text=True).stdout.splitlines()
with open(output, "w") as out:
    out.write("address\tsize\tfile_offset\tfile\tfunction\n")
    for (address, size, path, _), name in zip(kept, demangled):
        out.write("%x\t%d\t%x\t%s\t%s\n" % (address, size, file_offset(address), path, name.replace("\t", " ")))
print(len(kept))
