#!/usr/bin/env python3
"""Load generator and verifier for scripts/chaos (standard library only, loopback only).

  load.py register PORT PREFIX SESSIONS TOKEN     register SESSIONS sessions with 5 ads each
  load.py run PORT PREFIX SESSIONS OUT.json STOPFILE [--threads N] [--batch N] [--give-up S] [--max-seconds S]
      [--replays N]
      Threads send batches (keep-alive) until STOPFILE exists, retrying a batch that got no answer
      (connection error, timeout, 503) with the same body until it is answered, or until GIVE_UP
      seconds after STOPFILE appeared. Then a sample of REPLAYS (default 40) answered batches, and
      as many that needed retries, is replayed. Every attempt
      (start, end, outcome) and every answered event is written to OUT.json.
  load.py verify NAME OUT.json PREFIX [--times FILE] [--expect-loss] [--switchover] [--problem TEXT]... [--fact TEXT]...
      Checks the database (psql, DATABASE_URL) against OUT.json and prints one verdict line. With
      "fault" and "promoted" times (a failover): service must resume within 10 s of the promotion.
      --expect-loss: acknowledged events missing are counted as lost, and there must be some
      (asynchronous replication held behind). --switchover: 503 only from the fault to 10 s after
      the promotion.
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid

ADS_PER_SESSION = 5
REQUEST_TIMEOUT = 15.0     # a request unanswered after this counts as a hang


def ad_of(prefix, i, j):
    return f"{prefix}-ad-{i}-{j}"


def snapshot_of(prefix, i):
    return f"{prefix}-snap-{i}"


def register(port, prefix, sessions, token):
    errors = []
    lock = threading.Lock()

    def worker(ids):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in ids:
            ads = [{"ad_id": ad_of(prefix, i, j), "position": j * 5 + 3, "advertiser_id": f"{prefix}-adv-{j}",
                    "url": f"https://adv.example/{i}/{j}"} for j in range(ADS_PER_SESSION)]
            body = json.dumps({"snapshot_id": snapshot_of(prefix, i), "ads": ads})
            conn.request("PUT", f"/v1/sessions/{prefix}-s-{i}/feed", body,
                         {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status not in (200, 201):
                with lock:
                    errors.append(f"{i}: {r.status} {data[:200]!r}")
        conn.close()

    ids = list(range(sessions))
    threads = [threading.Thread(target=worker, args=(ids[n::8],)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"{len(errors)} registrations failed, first: {errors[0]}", file=sys.stderr)
        sys.exit(1)


def now_rfc3339():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def make_batch(rng, prefix, sessions, size):
    events = []
    for _ in range(size):
        i = rng.randrange(sessions)
        j = rng.randrange(ADS_PER_SESSION)
        session = f"{prefix}-s-{i}"
        ev = {"event_id": str(uuid.uuid4()), "session_id": session, "occurred_at": now_rfc3339()}
        r = rng.random()
        if r < 0.05:      # an ad never served: rejected ad_not_served, stored for audit
            ev.update(type="impression", ad_id=f"{prefix}-ad-unknown-{j}")
        elif r < 0.6:     # impressions: the first per (session, ad) counts, later ones are duplicates
            ev.update(type="impression", ad_id=ad_of(prefix, i, j))
            if rng.random() < 0.5:
                ev.update(visible_fraction=rng.choice([0.3, 0.8, 1.0]), visible_ms=rng.choice([500, 1500, 4000]))
        else:             # clicks on the current snapshot, at the right row
            ev.update(type="click", ad_id=ad_of(prefix, i, j), snapshot_id=snapshot_of(prefix, i), position=j * 5 + 3)
        events.append(ev)
    return events


class Client:
    def __init__(self, port):
        self.port = port
        self.conn = None

    def post(self, body):
        """Returns (status, headers dict, body bytes) or raises."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        try:
            self.conn.request("POST", "/v1/events", body, {"Content-Type": "application/json"})
            r = self.conn.getresponse()
            data = r.read()
            headers = {k.lower(): v for k, v in r.getheaders()}
            if r.will_close:
                self.close()
            return r.status, headers, data
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None


def run(port, prefix, sessions, out, stopfile, threads=8, batch=20, give_up=60.0, max_seconds=120.0, replays=40):
    lock = threading.Lock()
    attempts = []        # [start, end, outcome, retry_after_present, batch_no]
    batches = []         # {"events": [[id, type, session, ad]], "body": str, "answer": [[status, reason]] | None}
    began = time.time()
    stop_seen = [None]

    def stopped():
        if stop_seen[0] is None and (os.path.exists(stopfile) or time.time() - began > max_seconds):
            stop_seen[0] = time.time()
        return stop_seen[0] is not None

    def worker(n):
        rng = random.Random(n * 7919 + int(began))
        client = Client(port)
        while not stopped():
            events = make_batch(rng, prefix, sessions, batch)
            body = json.dumps({"events": events})
            rec = {"events": [[e["event_id"], e["type"], e["session_id"], e["ad_id"]] for e in events],
                   "body": body, "answer": None, "tries": 0, "other": []}
            with lock:
                batches.append(rec)
                no = len(batches) - 1
            backoff = 0.05
            while True:
                t0 = time.time()
                rec["tries"] += 1
                try:
                    status, headers, data = client.post(body)
                    outcome = status
                except (OSError, http.client.HTTPException) as e:
                    status, headers, data = None, {}, b""
                    outcome = "err:" + type(e).__name__
                t1 = time.time()
                with lock:
                    attempts.append([t0, t1, outcome, "retry-after" in headers, no])
                if status == 200:
                    results = json.loads(data)["results"]
                    rec["answer"] = [[r["status"], r.get("reason")] for r in results]
                    break
                if status is not None and status != 503:
                    rec["other"].append([status, data[:300].decode("utf-8", "replace")])
                    break    # an unexpected answer: recorded, reported by verify
                if stopped() and time.time() - stop_seen[0] > give_up:
                    break    # never answered
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
        client.close()

    ts = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

    # Replays: a sample of answered batches sent again must get the same answers (rule 2).
    answered = [b for b in batches if b["answer"] is not None]
    rng = random.Random(1)
    sample = rng.sample(answered, min(replays, len(answered)))
    # Prefer batches that needed several tries (their first attempt may have been committed unanswered).
    sample = [b for b in answered if b["tries"] > 1][:replays] + sample
    replays = []
    client = Client(port)
    deadline = time.time() + 60
    for b in sample[:80]:
        while True:
            try:
                status, _, data = client.post(b["body"])
            except (OSError, http.client.HTTPException) as e:
                status, data = None, repr(e).encode()
            if status in (None, 503) and time.time() < deadline:
                time.sleep(0.2)
                continue
            break
        got = [[r["status"], r.get("reason")] for r in json.loads(data)["results"]] if status == 200 else None
        replays.append({"status": status, "same": got == b["answer"],
                        "detail": None if got == b["answer"] else f"{status} {data[:300]!r} vs {b['answer'][:3]}"})
    client.close()
    for b in batches:
        del b["body"]
    with open(out, "w") as f:
        json.dump({"began": began, "stopped": stop_seen[0], "ended": time.time(), "batches": batches,
                   "attempts": attempts, "replays": replays}, f)


def psql(sql):
    out = subprocess.run(["psql", os.environ["DATABASE_URL"], "-v", "ON_ERROR_STOP=1", "-qAtX", "-F", "\t", "-c", sql],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v))) - 1))]


def verify(name, out, prefix, pg_times=None, problems=(), facts=(), expect_loss=False, switchover=False):
    with open(out) as f:
        data = json.load(f)
    problems = list(problems)
    facts = list(facts)
    batches, attempts = data["batches"], data["attempts"]
    rows = psql(f"SELECT event_id, status, reason, extract(epoch FROM received_at) FROM events "
                f"WHERE session_id LIKE '{prefix}-s-%'")
    stored = {r[0]: (r[1], r[2] or None) for r in rows}
    received = {r[0]: float(r[3]) for r in rows}
    t, kills = {}, []
    if pg_times:
        with open(pg_times) as f:
            for line in f:
                k, v = line.split()
                t[k] = float(v)
                if k == "killed":
                    kills.append(float(v))
    acked = missing = wrong = 0
    examples = []
    for b in batches:
        if b["answer"] is None:
            continue
        for (eid, typ, session, ad), (status, reason) in zip(b["events"], b["answer"]):
            acked += 1
            got = stored.get(eid)
            if got is None:
                missing += 1
                if len(examples) < 3 and not expect_loss:
                    examples.append(f"{eid} answered {status}/{reason}, not in events")
            elif got != (status, reason):
                wrong += 1
                if len(examples) < 3:
                    examples.append(f"{eid} answered {status}/{reason}, stored {got[0]}/{got[1]}")
    unanswered = sum(1 for b in batches if b["answer"] is None and not b["other"])
    retried = sum(1 for b in batches if b["answer"] is not None and b["tries"] > 1)
    others = [o for b in batches for o in b["other"]]
    if acked == 0:
        problems.append("no event was acknowledged")
    if expect_loss:
        facts.append(f"{missing} acknowledged events lost by the failover (asynchronous standby held behind)")
        if missing == 0:
            problems.append("no acknowledged event was lost: the check could not see a loss")
    elif missing:
        problems.append(f"{missing} acknowledged events missing from events")
    if wrong:
        problems.append(f"{wrong} events stored with another status/reason than answered")
    if examples:
        problems.append("e.g. " + "; ".join(examples))
    if others:
        codes = sorted({o[0] for o in others})
        problems.append(f"{len(others)} unexpected answers (status {codes}), first: {others[0][1][:200]}")
    dups = psql("SELECT event_id, count(*) FROM events GROUP BY 1 HAVING count(*) > 1")
    if dups:
        problems.append(f"{len(dups)} event_ids stored twice, e.g. {dups[0][0]}")
    multi = psql(f"SELECT session_id, ad_id, count(*) FROM events WHERE session_id LIKE '{prefix}-s-%' "
                 "AND type = 'impression' AND status = 'accepted' GROUP BY 1, 2 HAVING count(*) > 1")
    if multi:
        problems.append(f"{len(multi)} (session, ad) pairs with more than one accepted impression, e.g. {multi[0]}")
    bad_replays = [r for r in data["replays"] if not r["same"]]
    if bad_replays:
        problems.append(f"{len(bad_replays)}/{len(data['replays'])} replayed batches answered differently, "
                        f"first: {bad_replays[0]['detail']}")
    n503 = sum(1 for a in attempts if a[2] == 503)
    n503_no_ra = sum(1 for a in attempts if a[2] == 503 and not a[3])
    n500 = sum(1 for a in attempts if isinstance(a[2], int) and a[2] >= 500 and a[2] != 503)
    errs = sum(1 for a in attempts if isinstance(a[2], str))
    lat = [a[1] - a[0] for a in attempts]
    facts[:0] = [f"{acked} events acknowledged in {sum(1 for b in batches if b['answer'])} batches",
                 f"{retried} batches answered after retries", f"{unanswered} never answered",
                 f"{len(data['replays'])} replays identical" if not bad_replays else "replays differ",
                 f"{n503} x 503, {errs} connection errors/timeouts"]
    if n503_no_ra:
        problems.append(f"{n503_no_ra} 503 answers without Retry-After")
    if n500:
        problems.append(f"{n500} 5xx answers other than 503")

    if kills:
        # Batches stored by a process that was killed before it answered, and answered by its
        # successor: the real test of idempotent retries.
        answered_at = {}
        for a in attempts:
            if a[2] == 200:
                answered_at[a[4]] = a[1]
        n = 0
        for no, b in enumerate(batches):
            if b["answer"] is None or b["tries"] < 2 or not all(e[0] in received for e in b["events"]):
                continue
            stored_at = max(received[e[0]] for e in b["events"])
            later = [k for k in kills if k > stored_at]
            if later and answered_at.get(no, 0) > min(later):
                n += 1
        facts.append(f"{len(kills)} kills; {n} batches stored before a kill were answered only after it (as replays)")
    if "sigterm" in t:
        term = t["sigterm"]
        inflight = [a for a in attempts if a[0] < term < a[1]]
        dropped = [a for a in inflight if not isinstance(a[2], int) and a[0] < term - 0.05]
        facts.append(f"{len(inflight)} requests in flight at SIGTERM: "
                     f"{sum(1 for a in inflight if a[2] == 200)} answered 200, "
                     f"{sum(1 for a in inflight if not isinstance(a[2], int))} connection errors")
        if dropped:
            problems.append(f"{len(dropped)} requests sent at least 50 ms before SIGTERM got no answer "
                            f"({dropped[0][2]}, sent {term - dropped[0][0]:.3f} s before)")
    if "db_up" in t:
        down, up = t["db_stopped"], t["db_up"]
        outage = [a for a in attempts if a[0] >= down and a[0] < up]
        slow = max((a[1] - a[0] for a in outage), default=0.0)
        facts.append(f"{len(outage)} requests during the {up - t['db_stop_begin']:.1f} s outage "
                     f"({sum(1 for a in outage if a[2] == 503)} x 503), slowest {slow:.2f} s")
        if not outage:
            problems.append("no request was sent during the outage")
        if max(lat, default=0.0) > 10.0:
            problems.append(f"a request took {max(lat):.1f} s (> 10 s)")
        after = [a for a in attempts if a[0] >= down and a[2] == 200]
        if not after:
            problems.append("no 200 after the database came back")
        else:
            first = min(a[1] for a in after)
            recovery = max(0.0, first - up)
            late503 = [a for a in attempts if a[0] > up + 5.0 and a[2] != 200]
            facts.append(f"first 200 {recovery:.2f} s after the database was back")
            if recovery > 5.0:
                problems.append(f"first 200 only {recovery:.1f} s after the database came back (> 5 s)")
            if late503:
                problems.append(f"{len(late503)} non-200 outcomes for requests sent more than 5 s after the "
                                f"database came back, e.g. {late503[0][2]} at +{late503[0][0] - up:.1f} s")
    if "promoted" in t:
        fault, promoted = t["fault"], t["promoted"]
        resumed = [a[1] for a in attempts if a[2] == 200 and a[1] >= promoted]
        late = [a for a in attempts if a[0] > promoted + 10.0 and a[2] != 200]
        # Answered before the old primary's stop began (a request in flight at the stop may get 503).
        early = [a for a in attempts if a[1] < fault and a[2] != 200]
        during = [a for a in attempts if fault <= a[0] <= promoted + 10.0]
        facts.append(f"promoted {promoted - fault:.2f} s after the fault")
        if not resumed:
            problems.append("no 200 after the promotion")
        else:
            gap = min(resumed) - promoted
            facts.append(f"gap {gap:.2f} s from the promotion to the first 200 "
                         f"({min(resumed) - fault:.2f} s from the fault)")
            if gap > 10.0:
                problems.append(f"service resumed only {gap:.1f} s after the promotion (> 10 s)")
        facts.append(f"{sum(1 for a in during if a[2] == 503)} x 503 and "
                     f"{sum(1 for a in during if isinstance(a[2], str))} connection errors between the fault and "
                     f"10 s after the promotion")
        if late:
            problems.append(f"{len(late)} requests sent more than 10 s after the promotion were not answered 200, "
                            f"e.g. {late[0][2]} at +{late[0][0] - promoted:.1f} s")
        if switchover and early:
            problems.append(f"{len(early)} requests answered before the old primary's stop were not answered 200, "
                            f"e.g. {early[0][2]}")
    if "db_up" not in t:
        facts.append(f"p99 latency {pct(lat, 99) * 1000:.0f} ms")
    verdict = "FAIL" if problems else "PASS"
    print(f"{verdict} {name}: " + "; ".join(problems + facts))
    return 1 if problems else 0


def main(argv):
    cmd = argv[1]
    if cmd == "register":
        register(int(argv[2]), argv[3], int(argv[4]), argv[5])
    elif cmd == "run":
        opts = dict(threads=8, batch=20, give_up=60.0, max_seconds=120.0, replays=40)
        pos, rest = argv[2:7], argv[7:]
        while rest:
            key, value = rest[0].lstrip("-").replace("-", "_"), rest[1]
            opts[key] = type(opts[key])(value)
            rest = rest[2:]
        run(int(pos[0]), pos[1], int(pos[2]), pos[3], pos[4], **opts)
    elif cmd == "verify":
        name, out, prefix = argv[2:5]
        pg_times, problems, facts = None, [], []
        flags = {"expect_loss": False, "switchover": False}
        rest = argv[5:]
        while rest:
            if rest[0] in ("--expect-loss", "--switchover"):
                flags[rest[0][2:].replace("-", "_")] = True
                rest = rest[1:]
                continue
            if rest[0] == "--times":
                pg_times = rest[1]
            elif rest[0] == "--problem":
                problems.append(rest[1])
            elif rest[0] == "--fact":
                facts.append(rest[1])
            rest = rest[2:]
        sys.exit(verify(name, out, prefix, pg_times, problems, facts, **flags))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
