#!/usr/bin/env python3
"""Registers benchmark sessions with AdTally (scripts/bench-ingest, scripts/bench-citus).

Usage: register-sessions.py PORT PREFIX SESSIONS ADS_PER_SESSION AD_POOL [HOST]
Session PREFIX-<i> (i in 1..SESSIONS) gets snapshot snap-PREFIX-<i> of ADS_PER_SESSION ads: row j holds
ad-<(i + j * AD_POOL / ADS_PER_SESSION) % AD_POOL> at position j*5+3 (the function
scripts/bench/ingest.lua and scripts/bench/pgbench-insert.sql use). 16 connections, PUT
/v1/sessions/<id>/feed with the admin token "bench". A 503 (the server's answer when the database did
not answer in time: retry the same request) or a broken connection is tried again, up to 5 times in
all, a little later each time. Exits 1 naming the first failure.
"""
import http.client, json, sys, threading, time

port, prefix, sessions, per, pool = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
host = sys.argv[6] if len(sys.argv) > 6 else "127.0.0.1"
errors, lock = [], threading.Lock()
def worker(ids):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    for i in ids:
        session = f"{prefix}-{i}"
        ads = []
        for j in range(per):
            k = (i + j * (pool // per)) % pool
            ads.append({"ad_id": f"ad-{k}", "position": j * 5 + 3, "advertiser_id": f"adv-{k % 50}", "url": f"https://adv.example/{k}"})
        body = json.dumps({"snapshot_id": f"snap-{session}", "ads": ads})
        for attempt in range(5):
            try:
                conn.request("PUT", f"/v1/sessions/{session}/feed", body,
                             {"Authorization": "Bearer bench-admin-token", "Content-Type": "application/json"})
                r = conn.getresponse()
                status, data = r.status, r.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
                status, data = None, repr(e).encode()
            if status in (200, 201) or (status is not None and status != 503):
                break
            time.sleep(0.25 * 2 ** attempt)
        if status not in (200, 201):
            with lock:
                errors.append(f"{session}: {status} {data[:200]!r}")
    conn.close()
ids = list(range(1, sessions + 1))
threads = [threading.Thread(target=worker, args=(ids[n::16],)) for n in range(16)]
for t in threads: t.start()
for t in threads: t.join()
if errors:
    print(f"{len(errors)} registrations failed, first: {errors[0]}", file=sys.stderr)
    sys.exit(1)
