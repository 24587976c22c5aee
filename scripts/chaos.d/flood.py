#!/usr/bin/env python3
"""Connection flood for scripts/chaos (standard library only, loopback only).

  flood.py PORT SERVER_PID PREFIX [CONNS] [SLOW]

Opens CONNS idle connections at once (non-blocking connects), then SLOW slowloris connections that
send one header byte every 5 s, all from 127.0.0.1. Meanwhile one normal client, from 127.0.0.2 (a
client of its own: Linux routes all of 127.0.0.0/8 to the loopback device, and the flood is over
its address's connection cap, ADTALLY_CLIENT_MAX_CONNECTIONS), sends 200 sequential requests
(GET /healthz and POST /v1/events alternately, keep-alive). Checks: the server stays up, every
slowloris connection is closed by the server within 15 s of its first byte, and the normal client's
p99 is under 100 ms. Prints one verdict line; exit status 1 on FAIL.
"""
import errno
import http.client
import json
import os
import selectors
import socket
import sys
import threading
import time
import uuid

PORT, PID, PREFIX = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
CONNS = int(sys.argv[4]) if len(sys.argv) > 4 else 5000
SLOW = int(sys.argv[5]) if len(sys.argv) > 5 else 500
SLOW_CLOSE_LIMIT = 15.0
P99_LIMIT = 0.100
HARD_DEADLINE = time.time() + 90      # every loop below is bounded by this

problems, facts = [], []


def open_nonblocking(n):
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex(("127.0.0.1", PORT))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            continue
        socks.append(s)
    return socks


def wait_connected(socks, limit):
    """Waits until each connect completed (or limit s); returns the connected ones."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_WRITE)
    pending, ok = len(socks), []
    deadline = min(time.time() + limit, HARD_DEADLINE)
    while pending and time.time() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            sel.unregister(s)
            pending -= 1
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                ok.append(s)
            else:
                s.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    sel.close()
    return ok


# --- the normal client, started once the flood is in place ---
latencies, client_errors = [], []


def normal_client(start_evt):
    start_evt.wait(60)
    conn = None
    body_of = lambda: json.dumps({"event_id": str(uuid.uuid4()), "type": "impression",
                                  "session_id": f"{PREFIX}-s-{len(latencies) % 20}",
                                  "ad_id": f"{PREFIX}-ad-{len(latencies) % 20}-0",
                                  "occurred_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    for i in range(200):
        if time.time() > HARD_DEADLINE:
            break
        t0 = time.time()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10, source_address=("127.0.0.2", 0))
            if i % 2 == 0:
                conn.request("GET", "/healthz")
            else:
                conn.request("POST", "/v1/events", body_of(), {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                client_errors.append(f"{r.status}")
            if r.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as e:
            client_errors.append(type(e).__name__)
            if conn is not None:
                conn.close()
            conn = None
        latencies.append(time.time() - t0)
        time.sleep(0.05)
    if conn is not None:
        conn.close()


start_evt = threading.Event()
client_thread = threading.Thread(target=normal_client, args=(start_evt,))
client_thread.start()

try:
    t_flood = time.time()
    flood = open_nonblocking(CONNS)
    slow = open_nonblocking(SLOW)
    start_evt.set()        # the normal client runs while the flood connects
    flood = wait_connected(flood, 15)
    slow = wait_connected(slow, 15)
    facts.append(f"{len(flood)}/{CONNS} flood connections established in {time.time() - t_flood:.1f} s")
    time.sleep(1.0)
    try:   # descriptors the server holds: the flood connections it accepted
        facts.append(f"server holds {len(os.listdir(f'/proc/{PID}/fd'))} descriptors")
    except OSError:
        pass
    if len(flood) < CONNS * 0.9:
        problems.append(f"only {len(flood)} of {CONNS} flood connections established")
    if len(slow) < SLOW * 0.9:
        problems.append(f"only {len(slow)} of {SLOW} slowloris connections established")

    # --- slowloris: one byte every 5 s, watch for the server closing ---
    payload = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    state = {s: {"first": None, "sent": 0, "closed": None, "got": b""} for s in slow}
    sel = selectors.DefaultSelector()
    for s in slow:
        sel.register(s, selectors.EVENT_READ)
    next_send = time.time()
    open_count = len(slow)
    while open_count and time.time() < HARD_DEADLINE:
        now = time.time()
        if now >= next_send:
            for s, st in state.items():
                if st["closed"] is not None:
                    continue
                try:
                    s.send(payload[st["sent"]:st["sent"] + 1])
                    st["sent"] += 1
                    if st["first"] is None:
                        st["first"] = time.time()
                except OSError:
                    st["closed"] = time.time()
                    sel.unregister(s)
                    open_count -= 1
            next_send = now + 5.0
        first_any = min((st["first"] for st in state.values() if st["first"]), default=now)
        if now - first_any > SLOW_CLOSE_LIMIT + 10:
            break
        for key, _ in sel.select(timeout=min(0.2, max(0.0, next_send - time.time()))):
            s = key.fileobj
            st = state[s]
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if chunk:
                st["got"] += chunk
                continue
            st["closed"] = time.time()
            sel.unregister(s)
            open_count -= 1
    sel.close()
    closes = [st["closed"] - st["first"] for st in state.values() if st["closed"] and st["first"]]
    late = sum(1 for c in closes if c > SLOW_CLOSE_LIMIT)
    still_open = sum(1 for st in state.values() if st["closed"] is None)
    got408 = sum(1 for st in state.values() if st["got"].startswith(b"HTTP/1.1 408"))
    if closes:
        facts.append(f"slowloris closed {min(closes):.1f}-{max(closes):.1f} s after the first byte "
                     f"({got408}/{len(state)} with 408)")
    if late or still_open:
        problems.append(f"{late} slowloris connections closed after {SLOW_CLOSE_LIMIT:.0f} s, {still_open} never closed")

    client_thread.join(max(1.0, HARD_DEADLINE - time.time()))
    if client_thread.is_alive():
        problems.append("the normal client did not finish")
    lat = sorted(latencies)
    if lat:
        p50 = lat[len(lat) // 2]
        p99 = lat[min(len(lat) - 1, int(round(0.99 * len(lat))) - 1)]
        facts.append(f"normal client: {len(lat)} requests, p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
                     f"max {lat[-1] * 1000:.1f} ms")
        if p99 > P99_LIMIT:
            problems.append(f"normal client p99 {p99 * 1000:.0f} ms >= {P99_LIMIT * 1000:.0f} ms")
    else:
        problems.append("the normal client got no answer")
    if client_errors:
        problems.append(f"normal client: {len(client_errors)} failures, e.g. {client_errors[:3]}")
    for s in flood:
        s.close()
    for s in slow:
        s.close()
finally:
    start_evt.set()

# --- the server is still up and serving ---
try:
    os.kill(PID, 0)
except OSError:
    problems.append("the server process died")
try:
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        problems.append(f"/healthz after the flood: {r.status}")
except (OSError, http.client.HTTPException) as e:
    problems.append(f"/healthz after the flood: {type(e).__name__}")

print(("FAIL" if problems else "PASS") + " flood: " + "; ".join(problems + facts))
sys.exit(1 if problems else 0)
