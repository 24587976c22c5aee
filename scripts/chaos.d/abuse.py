#!/usr/bin/env python3
"""The `abuse` scenario of scripts/chaos (standard library only, loopback only).

  abuse.py PORT SERVER_PID PREFIX SESSIONS OUT.json NOTES.txt [--alone S] [--abuse S] [--limit EVENTS_PER_S]
           [--holders N] [--flooders N] [--hoard 1]

A well-behaved client (from 127.0.0.3, one kept-alive connection) sends batches of 10 events of
registered sessions every 25 ms (400 events/s, under its limit): alone for half of ALONE seconds
(default 30), then ABUSE seconds (default 60) while an abusive client (from 127.0.0.2; Linux routes all of
127.0.0.0/8 to the loopback device) floods POST /v1/events at 20 times its events limit (LIMIT,
default 1000 events/s: batches of 500 junk events, most of them failing rule 1, some of ads no feed
ever served, a few bodies that are not JSON) from FLOODERS threads, and from 5 s in tries to hold
HOLDERS (default 2000) idle connections open, opening again each one the server closes, then alone
again for the other half of ALONE (with --hoard 1 the holding starts first, 3 s before the flood, so
that the flood's connections from the same address are over the cap; its p99 alone is that of both halves: the shared machine's own
load drifts over a run, and this way the phase alone sees the same drift as the abuse). The flood
and the holding run in processes of their own: in the well-behaved client's process they would take
its interpreter lock, and its latency would measure Python, not the server.

Checks: every answer the well-behaved client gets is 200 (a connection error counts as a failure
too), and its p99 under abuse is within 1.5 times its p99 alone; the abuser gets 429s; the server's
resident memory and descriptors stay bounded (sampled every half second and printed: under abuse at
most 300 MiB above the most it used alone, and fewer descriptors than 2 per connection the abuser
could hold plus 500). Writes the well-behaved client's batches to OUT.json in load.py's format (so
that `load.py verify` checks that every acknowledged event is stored with its answer) and one line
per fact or problem to NOTES.txt ("F\ttext" or "P\ttext").
"""
import json
import multiprocessing
import os
import random
import re
import selectors
import socket
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402  (make_batch, pct)

PORT, PID, PREFIX, SESSIONS, OUT, NOTES = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                                           sys.argv[5], sys.argv[6])
opts = {"alone": 30.0, "abuse": 60.0, "limit": 1000, "holders": 2000, "flooders": 8, "stored": 0.2, "hoard": 0}
rest = sys.argv[7:]
while rest:
    key = rest[0].lstrip("-")
    opts[key] = type(opts[key])(rest[1])
    rest = rest[2:]
GOOD, BAD = "127.0.0.3", "127.0.0.2"
BATCH, INTERVAL = 10, 0.025
JUNK_PER_REQUEST = 500
FLOOD_EVENTS_PER_SECOND = 20 * opts["limit"]
HARD_DEADLINE = time.time() + opts["alone"] + opts["abuse"] + 60

facts, problems = [], []


def connect(source, timeout=15.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", PORT))
    return s


def read_response(s):
    """(status, headers dict, body bytes) of one response on a blocking socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return status, headers, body[:length]


# --- the well-behaved client ---
batches, attempts, latencies = [], [], {"alone": [], "abuse": []}
good_failures = []


def phase_at(t):
    return "abuse" if t_abuse_start <= t < t_abuse_end else "alone"


def good_client(t_end):
    rng = random.Random(20261201)
    conn = None
    next_at = time.time()
    while time.time() < t_end and time.time() < HARD_DEADLINE:
        events = load.make_batch(rng, PREFIX, SESSIONS, BATCH)
        body = json.dumps({"events": events}).encode()
        rec = {"events": [[e["event_id"], e["type"], e["session_id"], e["ad_id"]] for e in events],
               "answer": None, "tries": 0, "other": []}
        batches.append(rec)
        no = len(batches) - 1
        while rec["answer"] is None and time.time() < HARD_DEADLINE:
            rec["tries"] += 1
            phase = phase_at(time.time())
            t0 = time.time()
            try:
                if conn is None:
                    conn = connect(GOOD)
                conn.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                status, headers, data = read_response(conn)
                outcome = status
                if headers.get("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, ValueError, IndexError) as e:
                status, headers, data = None, {}, b""
                outcome = "err:" + type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            t1 = time.time()
            attempts.append([t0, t1, outcome, "retry-after" in headers, no])
            if status == 200:
                rec["answer"] = [[r["status"], r.get("reason")] for r in json.loads(data)["results"]]
                latencies[phase].append(t1 - t0)
                break
            good_failures.append(f"{phase}: {outcome}")
            if status is not None:
                rec["other"].append([status, data[:300].decode("utf-8", "replace")])
                break    # an answer other than 200: recorded, and a failure of this scenario
            time.sleep(0.2)   # no answer: the same batch again (idempotent)
        next_at += INTERVAL
        time.sleep(max(0.0, next_at - time.time()))
    if conn is not None:
        conn.close()


# --- the abusive client ---
flood = {"sent": 0, "events_sent": 0, "statuses": {}, "errors": 0}
flood_lock = threading.Lock()


def junk_bodies():
    """A few bodies, made once: batches of 500 junk events, and bodies that are not JSON."""
    rng = random.Random(666)
    bodies = []
    for variant in range(8):
        events = []
        for k in range(JUNK_PER_REQUEST):
            r = rng.random()
            if r < opts["stored"]:
                # Well-formed, of an ad no feed ever served: rejected and stored for audit.
                events.append({"event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "type": "impression",
                               "session_id": f"abuse-s-{rng.randrange(100000)}", "ad_id": f"abuse-ad-{rng.randrange(1000)}",
                               "occurred_at": load.now_rfc3339()})
            elif r < 0.6:
                events.append({"event_id": "not-a-uuid", "type": "view", "session_id": "x" * 200, "ad_id": "",
                               "occurred_at": "yesterday"})
            else:
                events.append({"junk": rng.random(), "padding": "z" * rng.randrange(10, 100)})
        bodies.append((json.dumps({"events": events}).encode(), JUNK_PER_REQUEST))
    bodies.append((b'{"events": [{"event_id": ' + b"[" * 5000, 1))   # not JSON: costs 1
    return bodies


def flooder(n, bodies, t_end):
    rng = random.Random(n)
    events_per_second = FLOOD_EVENTS_PER_SECOND / opts["flooders"]   # this thread's share
    conn = None
    next_at = time.time()
    while time.time() < t_end and time.time() < HARD_DEADLINE:
        body, count = bodies[rng.randrange(len(bodies))]
        try:
            if conn is None:
                conn = connect(BAD, timeout=10)
            conn.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            status, headers, _ = read_response(conn)
            with flood_lock:
                flood["sent"] += 1
                flood["events_sent"] += count
                flood["statuses"][status] = flood["statuses"].get(status, 0) + 1
            if headers.get("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, ValueError, IndexError):
            with flood_lock:
                flood["errors"] += 1
            if conn is not None:
                conn.close()
            conn = None
        next_at += count / events_per_second   # paced in events: 20 times the limit
        delay = next_at - time.time()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.time()   # behind: no catching up in a burst
    if conn is not None:
        conn.close()


holding = {"open_max": 0, "closed_by_server": 0, "opened": 0}


def holder(target, t_end):
    """Tries to hold `target` idle connections from BAD, opening again each one the server closes."""
    sel = selectors.DefaultSelector()
    pending = 0

    def open_some(k):
        nonlocal pending
        for _ in range(k):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((BAD, 0))
                s.connect_ex(("127.0.0.1", PORT))
            except OSError:
                s.close()
                continue
            sel.register(s, selectors.EVENT_WRITE, "connecting")
            pending += 1
            holding["opened"] += 1

    open_some(target)
    established = 0
    while time.time() < t_end and time.time() < HARD_DEADLINE:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            if key.data == "connecting":
                pending -= 1
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    sel.modify(s, selectors.EVENT_READ, "open")
                    established += 1
                else:
                    sel.unregister(s)
                    s.close()
                continue
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:   # the server closed it (an idle connection over the cap)
                sel.unregister(s)
                s.close()
                established -= 1
                holding["closed_by_server"] += 1
        holding["open_max"] = max(holding["open_max"], established)
        missing = target - established - pending
        if missing > 0:
            open_some(min(missing, 200))    # at most 200 new connections per round: no tight loop
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    sel.close()


# --- the server, sampled ---
samples = []


def sampler(t_end):
    while time.time() < t_end and time.time() < HARD_DEADLINE:
        try:
            with open(f"/proc/{PID}/status") as f:
                rss = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024
            fds = len(os.listdir(f"/proc/{PID}/fd"))
            with open(f"/proc/{PID}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            samples.append((time.time(), phase_at(time.time()), rss, fds, cpu))
        except (OSError, AttributeError):
            pass
        time.sleep(0.5)


def metrics():
    try:
        s = connect("127.0.0.1", timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _, _, body = read_response(s)
        s.close()
    except (OSError, ValueError, IndexError):
        return {}
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def flood_process(t_end, results):
    bodies = junk_bodies()
    threads = [threading.Thread(target=flooder, args=(n, bodies, t_end)) for n in range(opts["flooders"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, HARD_DEADLINE - time.time()))
    results.put(("flood", flood))


def hold_process(t_end, results):
    holder(opts["holders"], t_end)
    results.put(("holding", holding))


began = time.time()
t_abuse_start = began + opts["alone"] / 2
t_abuse_end = t_abuse_start + opts["abuse"]
t_end = t_abuse_end + opts["alone"] / 2
threads = [threading.Thread(target=good_client, args=(t_end,)), threading.Thread(target=sampler, args=(t_end,))]
for t in threads:
    t.start()
time.sleep(max(0.0, t_abuse_start - time.time()))
context = multiprocessing.get_context("fork")
results = context.Queue()
if opts["hoard"]:
    # Hoarding: the idle connections first (3 s to open them), then the flood from the same address.
    abusers = [context.Process(target=hold_process, args=(t_abuse_end, results))]
    abusers[0].start()
    time.sleep(3)
    abusers.append(context.Process(target=flood_process, args=(t_abuse_end, results)))
    abusers[1].start()
else:
    abusers = [context.Process(target=flood_process, args=(t_abuse_end, results))]
    abusers[0].start()
    time.sleep(5)
    abusers.append(context.Process(target=hold_process, args=(t_abuse_end, results)))
    abusers[1].start()
time.sleep(max(0.0, t_abuse_end - 1 - time.time()))
after = metrics()   # a second before the abuse ends, while it is on
for _ in abusers:
    try:
        kind, value = results.get(timeout=max(1.0, HARD_DEADLINE - time.time()))
        (flood if kind == "flood" else holding).update(value)
    except Exception:   # queue.Empty: reported below as missing numbers
        problems.append("an abusing process did not report")
for process in abusers:
    process.join(5)
    if process.is_alive():
        process.kill()
for t in threads:
    t.join(max(1.0, HARD_DEADLINE - time.time()))

# --- verdicts ---
alone, abused = latencies["alone"], latencies["abuse"]
p99_alone, p99_abused = load.pct(alone, 99), load.pct(abused, 99)
facts.append(f"well-behaved client: {len(alone)} batches alone (before and after), p50 {load.pct(alone, 50) * 1000:.1f} ms, "
             f"p99 {p99_alone * 1000:.1f} ms; {len(abused)} under abuse, p50 {load.pct(abused, 50) * 1000:.1f} ms, "
             f"p99 {p99_abused * 1000:.1f} ms ({p99_abused / p99_alone if p99_alone else float('nan'):.2f} x)")
if len(alone) < 200 or len(abused) < 400:
    problems.append(f"too few batches measured ({len(alone)} alone, {len(abused)} under abuse)")
if good_failures:
    problems.append(f"the well-behaved client got {len(good_failures)} answers other than 200, e.g. {good_failures[:3]}")
if not (p99_abused <= 1.5 * p99_alone):
    problems.append(f"the well-behaved client's p99 under abuse ({p99_abused * 1000:.1f} ms) is more than 1.5 x "
                    f"its p99 alone ({p99_alone * 1000:.1f} ms)")
elapsed = opts["abuse"]
statuses = ", ".join(f"{k}: {v}" for k, v in sorted(flood["statuses"].items()))
facts.append(f"abuser: {flood['sent']} requests ({flood['events_sent'] / elapsed:.0f} events/s offered, "
             f"{20} x its limit of {opts['limit']}), answers {statuses}, {flood['errors']} connection errors")
limited = {k: int(after.get(f'adtally_http_rate_limited_total{{limit="{k}"}}', 0)) for k in ("events", "connections", "auth")}
facts.append(f"429s by limit (server): events {limited['events']}, connections {limited['connections']}, auth {limited['auth']}")
facts.append(f"abuser's idle connections: at most {holding['open_max']} open at once of {opts['holders']} tried, "
             f"{holding['closed_by_server']} closed by the server, {holding['opened']} opened")
if flood["statuses"].get(429, 0) == 0:
    problems.append("the abuser got no 429")
rss = {p: max((s[2] for s in samples if s[1] == p), default=0) for p in ("alone", "abuse")}
fds = {p: max((s[3] for s in samples if s[1] == p), default=0) for p in ("alone", "abuse")}

def cpu_share(phase):
    points = [(s[0], s[4]) for s in samples if s[1] == phase]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return float("nan")
    return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


refused = sum(limited.values())
extra_cpu = (cpu_share("abuse") - cpu_share("alone")) * elapsed   # CPU seconds the abuse added
operations = flood["sent"] + holding["opened"]   # the abuser's requests and the connections it opened
facts.append(f"server CPU {cpu_share('alone') * 100:.1f}% of a core alone, {cpu_share('abuse') * 100:.1f}% under abuse; "
             f"per refused request {extra_cpu / refused * 1e6 if refused else float('nan'):.0f} us (all the CPU the abuse added, "
             f"its idle connections and its few stored batches with it, over its {refused} 429s), "
             f"per abuser request or connection {extra_cpu / operations * 1e6 if operations else float('nan'):.0f} us "
             f"(over its {operations} requests and connections)")
facts.append(f"server RSS max {rss['alone'] / 2**20:.0f} MiB alone, {rss['abuse'] / 2**20:.0f} MiB under abuse; "
             f"descriptors max {fds['alone']} alone, {fds['abuse']} under abuse; "
             f"connections open a second before the abuse ended {int(after.get('adtally_http_connections_open', -1))}")
if rss["abuse"] > rss["alone"] + 300 * 2**20:
    problems.append(f"the server's memory grew by {(rss['abuse'] - rss['alone']) / 2**20:.0f} MiB under abuse")
if fds["abuse"] > 2 * opts["holders"] + 500:
    problems.append(f"the server held {fds['abuse']} descriptors under abuse")
if not samples:
    problems.append("the server could not be sampled")

with open(OUT, "w") as f:
    json.dump({"began": began, "stopped": t_end, "ended": time.time(), "batches": batches, "attempts": attempts,
               "replays": []}, f)
with open(NOTES, "w") as f:
    for p in problems:
        f.write("P\t" + p + "\n")
    for x in facts:
        f.write("F\t" + x + "\n")
print(("FAIL" if problems else "PASS") + " abuse (load): " + "; ".join(problems + facts), file=sys.stderr)
