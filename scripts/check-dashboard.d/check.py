#!/usr/bin/env python3
"""The dashboard's browser test (docs/DASHBOARD.md), run by scripts/check-dashboard.

  check.py seed-past --database-url URL --out FILE
      Stores events of earlier days straight into PostgreSQL (received_at is the server clock, so the
      API can only make today's), and moves the rollup watermark back so that AdTally counts them from
      the raw rows and folds them as it does in production. Run after `adtally migrate`, before
      `adtally serve`. Writes what it stored, for `fixture --past`.
  check.py fixture --url URL --token TOKEN --past FILE --out FILE
      Registers feeds and sends today's events through the real API, checks each event's status,
      credits some events of earlier days (POST /v1/adjustments: TOKEN must have every scope) and
      checks what each credit counted, and writes the expected counts and credits for
      `browser --expect`.
  check.py browser --url URL --token TOKEN --work DIR [--expect FILE]
      Drives headless Chromium through Selenium and prints PASS/FAIL per check; exits 1 on any FAIL.

Every wait is bounded; Selenium, Chromium and every HTTP request have timeouts.
"""
import argparse
import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from zoneinfo import ZoneInfo

UTC = dt.timezone.utc
HTTP_TIMEOUT = 20
ADVERTISERS = {"ad-acme-1": "acme", "ad-acme-2": "acme", "ad-globex-1": "globex"}
COUNT_KEYS = ["impressions", "clicks", "duplicate_impressions", "rejected_impressions", "duplicate_clicks", "rejected_clicks"]
BUG_REASONS = ["impression_already_counted", "click_within_window", "simultaneous_click", "ad_not_in_feed",
               "stale_snapshot", "position_mismatch", "not_viewable", "ad_not_served"]
INVALID_REASONS = ["no_impression", "click_limit_exceeded", "bot_agent", "blocked_address"]


def rfc3339(t):
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def empty_counts():
    return {key: 0 for key in COUNT_KEYS}


def count_outcome(counts, kind, status):
    if status == "accepted":
        counts["impressions" if kind == "impression" else "clicks"] += 1
    else:
        counts[f"{status}_{kind}s"] += 1


# ------------------------------------------------------------------------------------ seed-past

def seed_past(args):
    """Earlier days: D-5 and D-2 (UTC), at 12:00 and 13:00 UTC, so that in any zone from -11 to +14
    they stay inside the last 7 local days and on days that are over (final)."""
    today = dt.datetime.now(UTC).date()
    plan = [
        # (days back, hour UTC, ad, type, status, reason, how many)
        (2, 12, "ad-acme-1", "impression", "accepted", None, 9),
        (2, 12, "ad-acme-1", "click", "accepted", None, 2),
        (2, 12, "ad-acme-1", "impression", "duplicate", "impression_already_counted", 1),
        (2, 12, "ad-acme-1", "click", "rejected", "stale_snapshot", 1),
        (2, 12, "ad-acme-2", "impression", "accepted", None, 4),
        (2, 12, "ad-acme-2", "impression", "rejected", "not_viewable", 1),
        (5, 13, "ad-globex-1", "impression", "accepted", None, 5),
        (5, 13, "ad-globex-1", "click", "accepted", None, 1),
        (5, 13, "ad-globex-1", "click", "duplicate", "click_within_window", 1),
        # Invalid traffic (API 1.3): a script's clicks without impressions, a session over its click
        # limit, a crawler, a blocked address.
        (2, 13, "ad-acme-1", "click", "rejected", "no_impression", 3),
        (2, 13, "ad-acme-1", "click", "rejected", "click_limit_exceeded", 2),
        (5, 12, "ad-globex-1", "impression", "rejected", "bot_agent", 1),
        (5, 12, "ad-globex-1", "click", "rejected", "blocked_address", 1),
    ]
    values = []
    stored = []
    for back, hour, ad, kind, status, reason, n in plan:
        day = today - dt.timedelta(days=back)
        for i in range(n):
            at = dt.datetime(day.year, day.month, day.day, hour, 0, 0, tzinfo=UTC) + dt.timedelta(seconds=7 * len(values))
            session = f"past-{back}-{ad}-{i}"
            values.append("('%s', '%s', '%s', '%s', '%s', %s, '%s', '%s', NULL, NULL, NULL, NULL)" % (
                session, uuid.uuid4(), kind, ad, status, "NULL" if reason is None else "'%s'" % reason,
                at.isoformat(), at.isoformat()))
            stored.append({"received_at": rfc3339(at), "session_id": session, "ad_id": ad, "type": kind, "status": status,
                           "reason": reason})
    sql = """
\\set ON_ERROR_STOP on
BEGIN;
INSERT INTO ads (ad_id, advertiser_id) VALUES %s ON CONFLICT (ad_id) DO NOTHING;
INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                    snapshot_id, position, visible_fraction, visible_ms)
VALUES
%s;
-- The rollups cover every event before folded_to; reports read raw rows after it. Starting them
-- again at the oldest event's hour (adtally_restart_rollups, migration 0010: the rollup rows from
-- then on are deleted) has maintenance fold these rows, with whatever came since, exactly once.
SELECT adtally_restart_rollups(least(s.folded_to, o.oldest))
  FROM lifecycle_state s, (SELECT min(received_at) AS oldest FROM events) o;
UPDATE lifecycle_state
   SET oldest_received_at = least(coalesce(oldest_received_at, o.oldest), o.oldest)
  FROM (SELECT min(received_at) AS oldest FROM events) o;
COMMIT;
""" % (", ".join("('%s', '%s')" % pair for pair in ADVERTISERS.items()), ",\n".join(values))
    result = subprocess.run(["psql", args.database_url, "-X", "-q"], input=sql, text=True,
                            capture_output=True, timeout=60)
    if result.returncode != 0:
        print("FAIL  fixture: earlier days not stored (has the schema of events or lifecycle_state changed? "
              "see seed_past in scripts/check-dashboard.d/check.py):\n" + result.stderr, flush=True)
        return 1
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(stored, f, indent=1)
    print(f"PASS  fixture: {len(stored)} events of earlier days stored in PostgreSQL", flush=True)
    return 0


# ------------------------------------------------------------------------------------ fixture

def request(method, url, token=None, body=None, accept="application/json", timeout=HTTP_TIMEOUT):
    headers = {"Accept": accept}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def fixture(args):
    """Today's events through the API, each with the status the contract gives it."""
    base = args.url.rstrip("/")
    run = uuid.uuid4().hex[:8]
    now = dt.datetime.now(UTC)
    sessions = []
    for i in range(1, 7):
        session = f"fx-{run}-s{i}"
        snapshot = f"fx-{run}-snap-{i}"
        feed = {"snapshot_id": snapshot, "ads": [
            {"ad_id": "ad-acme-1", "position": 1, "advertiser_id": "acme", "url": "https://acme.example/one"},
            {"ad_id": "ad-acme-2", "position": 2, "advertiser_id": "acme", "url": "https://acme.example/two"},
            {"ad_id": "ad-globex-1", "position": 3, "advertiser_id": "globex", "url": "https://globex.example/"}]}
        status, _, body = request("PUT", f"{base}/v1/sessions/{session}/feed", args.token, feed)
        if status not in (200, 201):
            print(f"FAIL  fixture: PUT feed of {session} answered {status}: {body[:300]!r}", flush=True)
            return 1
        sessions.append((session, snapshot))

    def at(seconds):
        return rfc3339(now - dt.timedelta(seconds=seconds))

    def imp(ad, position, fraction=0.9, ms=1500, when=60):
        return {"type": "impression", "ad_id": ad, "position": position, "visible_fraction": fraction, "visible_ms": ms, "occurred_at": at(when)}

    def click(ad, position, when=50, snapshot=None):
        event = {"type": "click", "ad_id": ad, "position": position, "occurred_at": at(when)}
        if snapshot:
            event["snapshot_id"] = snapshot
        return event

    # (session index, events with the status each must get)
    plan = [
        (0, [(imp("ad-acme-1", 1), "accepted"), (imp("ad-acme-1", 1, when=55), "duplicate"),
             (click("ad-acme-1", 1, when=50), "accepted"), (click("ad-acme-1", 1, when=45), "duplicate")]),
        (1, [(imp("ad-acme-1", 1), "accepted"), (imp("ad-acme-2", 2), "accepted"),
             (click("ad-acme-1", 1, when=40), "accepted"), (click("ad-acme-2", 2, when=39.7), "duplicate")]),
        (2, [(imp("ad-acme-1", 1, fraction=0.2, when=70), "rejected"), (imp("ad-acme-1", 1), "accepted"),
             (click("ad-acme-1", 7, when=30), "rejected"), (click("ad-acme-1", 1, when=20, snapshot="fx-old-snapshot"), "rejected")]),
        (3, [(imp("ad-globex-1", 3), "accepted"), (click("ad-globex-1", 3, when=10), "accepted")]),
        (4, [(imp("ad-globex-1", 3), "accepted"), (imp("ad-acme-2", 2), "accepted")]),
        (5, [(imp("ad-ghost", 4), "rejected")]),
    ]
    today = []
    problems = []
    for index, events in plan:
        session, snapshot = sessions[index]
        batch = []
        for event, _ in events:
            event = dict(event, event_id=str(uuid.uuid4()), session_id=session)
            if event["type"] == "click" and "snapshot_id" not in event:
                event["snapshot_id"] = snapshot
            batch.append(event)
        status, _, body = request("POST", f"{base}/v1/events", None, {"events": batch})
        if status != 200:
            print(f"FAIL  fixture: POST /v1/events answered {status}: {body[:300]!r}", flush=True)
            return 1
        results = json.loads(body)["results"]
        for (event, expected), sent, result in zip(events, batch, results):
            if result["status"] != expected:
                problems.append(f"{session} {sent['type']} {sent['ad_id']}: {result} (expected {expected})")
            today.append({"received_at": rfc3339(now), "ad_id": sent["ad_id"], "type": sent["type"],
                          "status": result["status"], "reason": result.get("reason")})
    if problems:
        print("FAIL  fixture: events answered otherwise than the contract says:\n  " + "\n  ".join(problems), flush=True)
        return 1
    with open(args.past, encoding="utf-8") as f:
        past = json.load(f)
    print(f"PASS  fixture: 6 feeds and {len(today)} events of today sent through the API, each answered as expected", flush=True)
    credits = make_credits(base, args.token, run, past)
    if credits is None:
        return 1
    expected = {"fixture_time": rfc3339(now), "events": past + today, "credits": credits}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1)
    return 0


def make_credits(base, token, run, past):
    """Credits (API 1.4) of events of earlier days, made now: a review's sessions on D-2 (two ads)
    and an advertiser's dispute of D-5. `to` is in the past (at or before final_before) and `from`
    well within the raw-event retention. Each answer must count exactly the accepted events the
    adjustment matches; returns the answers, or None after a FAIL."""
    today = dt.datetime.now(UTC).date()

    def day_start(back):
        day = today - dt.timedelta(days=back)
        return dt.datetime(day.year, day.month, day.day, tzinfo=UTC)

    plan = [
        {"adjustment_id": f"fx-{run}-review", "reason": "sivt", "note": "check-dashboard: a review found these sessions invalid",
         "from": rfc3339(day_start(2)), "to": rfc3339(day_start(1)),
         "session_ids": ["past-2-ad-acme-1-0", "past-2-ad-acme-1-1", "past-2-ad-acme-2-0"]},
        {"adjustment_id": f"fx-{run}-dispute", "reason": "advertiser_dispute", "note": "check-dashboard: globex disputed a day",
         "from": rfc3339(day_start(5)), "to": rfc3339(day_start(4)), "advertiser_id": "globex"},
    ]
    answers = []
    problems = []
    for body in plan:
        status, _, answer = request("POST", f"{base}/v1/adjustments", token, body)
        if status != 201:
            print(f"FAIL  fixture: POST /v1/adjustments {body['adjustment_id']} answered {status}: {answer[:300]!r}", flush=True)
            return None
        answer = json.loads(answer)
        want = {}
        for event in past:
            if event["status"] != "accepted" or not (body["from"] <= event["received_at"] < body["to"]):
                continue
            if "session_ids" in body and event["session_id"] not in body["session_ids"]:
                continue
            if "advertiser_id" in body and ADVERTISERS[event["ad_id"]] != body["advertiser_id"]:
                continue
            counts = want.setdefault(event["ad_id"], [0, 0])
            counts[0 if event["type"] == "impression" else 1] += 1
        got = {ad["ad_id"]: [ad["credited_impressions"], ad["credited_clicks"]] for ad in answer["ads"]}
        if got != want or answer["credited_impressions"] != sum(c[0] for c in want.values()) \
                or answer["credited_clicks"] != sum(c[1] for c in want.values()):
            problems.append(f"{body['adjustment_id']}: credited {got}, matched accepted events {want}")
        answers.append(answer)
    if problems:
        print("FAIL  fixture: credits counted otherwise than the events they match:\n  " + "\n  ".join(problems), flush=True)
        return None
    print(f"PASS  fixture: {len(answers)} adjustments made through the API, each crediting exactly the accepted events it matches "
          f"({', '.join(a['adjustment_id'] + ': ' + str(a['credited_impressions']) + ' impressions, ' + str(a['credited_clicks']) + ' clicks' for a in answers)})",
          flush=True)
    return answers


# ------------------------------------------------------------------------------------ browser

class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS  {name}" + (f": {detail}" if detail else ""), flush=True)
        else:
            self.failed += 1
            print(f"FAIL  {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok


def start_of_local_day(date, zone):
    """The first instant whose local date in `zone` is `date`, to the minute (every offset in use
    today is whole minutes), found by scanning the instants around local midnight."""
    tz = ZoneInfo(zone)
    midnight = dt.datetime(date.year, date.month, date.day, tzinfo=UTC)
    t = midnight - dt.timedelta(hours=15)
    while t < midnight + dt.timedelta(hours=15):
        if t.astimezone(tz).date() == date:
            return int(t.timestamp() * 1000)
        t += dt.timedelta(minutes=1)
    raise ValueError(f"no start of {date} in {zone}")


def browser(args):
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must download nothing
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    base = args.url.rstrip("/")
    origin = urllib.parse.urlsplit(base)
    origin = f"{origin.scheme}://{origin.netloc}"
    work = os.path.abspath(args.work)
    downloads = os.path.join(work, "downloads")
    os.makedirs(downloads, exist_ok=True)
    expected = None
    if args.expect:
        with open(args.expect, encoding="utf-8") as f:
            expected = json.load(f)
    checks = Checks()
    check = checks.check

    # --- The page's headers, as the server sends them (no browser needed).
    status, headers, body = request("GET", base + "/dashboard", accept="text/html")
    headers = {k.lower(): v for k, v in headers.items()}
    csp = headers.get("content-security-policy", "")
    if not check("GET /dashboard answers the page", status == 200 and headers.get("content-type", "").startswith("text/html")
                 and b"<form" in body, f"status {status}, Content-Type {headers.get('content-type')}"):
        if status == 404:
            print("      this AdTally does not serve the dashboard: its routes are not wired (docs/DASHBOARD.md)", flush=True)
        print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
        return 1
    directives = {d.strip().split(" ")[0]: d.strip() for d in csp.split(";") if d.strip()}
    check("Content-Security-Policy allows only the same origin",
          directives.get("default-src") == "default-src 'none'" and "'self'" in directives.get("script-src", "")
          and "unsafe-inline" not in csp and "unsafe-eval" not in csp and "http" not in csp and "*" not in csp
          and "frame-ancestors 'none'" in csp, csp or "(none)")
    check("X-Content-Type-Options and Referrer-Policy", headers.get("x-content-type-options") == "nosniff"
          and headers.get("referrer-policy") == "no-referrer",
          f"{headers.get('x-content-type-options')}, {headers.get('referrer-policy')}")
    asset_types = {"/dashboard/dashboard.js": "text/javascript", "/dashboard/dashboard.css": "text/css",
                   "/dashboard/favicon.svg": "image/svg+xml"}
    wrong = []
    for path, kind in asset_types.items():
        status, h, _ = request("GET", base + path, accept="*/*")
        h = {k.lower(): v for k, v in h.items()}
        if status != 200 or not h.get("content-type", "").startswith(kind) or h.get("x-content-type-options") != "nosniff":
            wrong.append(f"{path}: {status} {h.get('content-type')}")
    check("the assets answer with their content types and nosniff", not wrong, "; ".join(wrong))

    # --- Chromium.
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--lang=en-US", "--window-size=1440,900",
                 "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--password-store=basic",
                 "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
                 f"--user-data-dir={os.path.join(work, 'profile')}"]:
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False,
                                              "intl.accept_languages": "en-US"})
    service = Service(executable_path=args.chromedriver, log_output=os.path.join(work, "chromedriver.log"),
                      env=dict(os.environ, TZ="UTC", LANG="en_US.UTF-8"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(20)
    requests_seen = []  # every URL the page asked for
    console = []  # (phase, entry)
    phase = ["load"]

    def set_phase(name):
        drain_logs()  # what came before belongs to the phase before
        phase[0] = name

    def drain_logs():
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                params = message["params"]
                requests_seen.append((phase[0], params["request"]["url"], params.get("documentURL", "")))
        for entry in driver.get_log("browser"):
            console.append((phase[0], entry))

    def severe(in_phase, allowed=()):
        drain_logs()
        found = [e["message"] for p, e in console if p == in_phase and e["level"] == "SEVERE"]
        return [m for m in found if not any(a in m for a in allowed)]

    def shot(name):
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        import base64
        data = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))
        print(f"      screenshot {path}", flush=True)

    def wait(what, condition, timeout=20):
        try:
            return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition())
        except TimeoutException:
            return None

    def js(script, *arguments):
        return driver.execute_script(script, *arguments)

    def report_urls():
        drain_logs()
        return [u for _, u, _ in requests_seen if "/v1/reports/ads?" in u]

    def loaded_after(count):
        """Waits for a listing request after the `count` seen so far and for the page to finish it."""
        def done():
            urls = report_urls()
            return (len(urls) > count and js("return document.getElementById('content').getAttribute('aria-busy') === 'false'"
                                               " && document.getElementById('status').textContent.startsWith('Updated')")
                    and urls[-1])
        return wait("listing", done, 30)

    def api_json(page_url, credential=None, **changes):
        parts = urllib.parse.urlsplit(page_url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        query.update(changes)
        url = base + parts.path + "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        status, headers, body = request("GET", url, credential or args.token,
                                        accept="application/json" if query.get("format") != "csv" else "text/csv")
        if status != 200:
            raise RuntimeError(f"{url} answered {status}: {body[:200]!r}")
        return body if query.get("format") == "csv" else json.loads(body)

    def ads_in_dom():
        return js("""return [...document.querySelectorAll('#ads-table tbody tr')].map(tr =>
                       [...tr.cells].map(td => td.textContent.trim()));""")

    def days_in_dom():
        return js("""return [...document.querySelectorAll('#daily-chart g.day-group')].map(g => ({
                       day: g.dataset.day, final: g.dataset.final === 'true',
                       open: [...g.querySelectorAll('rect.bar')].every(r => r.classList.contains('open')),
                       bars: g.querySelectorAll('rect.bar').length,
                       fill: getComputedStyle(g.querySelector('rect.bar.impressions')).fill}));""")

    def integer(text):
        digits = "".join(ch for ch in text if ch.isdigit())
        return int(digits) if digits else None

    def compare_table(listing, label):
        rows = {r["ad_id"]: r for r in listing["rows"]}
        dom = {cells[0]: cells for cells in ads_in_dom()}
        problems = []
        if set(dom) != set(rows):
            problems.append(f"ads on the page {sorted(dom)} but the API lists {sorted(rows)}")
        for ad, row in rows.items():
            cells = dom.get(ad)
            if not cells:
                continue
            want = [row["advertiser_id"] or "none", row["impressions"], row["clicks"],
                    row["duplicate_impressions"] + row["rejected_impressions"], row["duplicate_clicks"] + row["rejected_clicks"]]
            got = [cells[1], integer(cells[2]), integer(cells[3]), integer(cells[5]), integer(cells[6])]
            if want != got:
                problems.append(f"{ad}: page {got}, API {want}")
            ctr_text = cells[4]
            if row["ctr"] is None:
                if ctr_text != "–":
                    problems.append(f"{ad}: CTR {ctr_text!r}, API null")
            else:
                try:
                    shown = float(ctr_text.rstrip("%").replace(",", ""))
                except ValueError:
                    shown = None
                if shown is None or abs(shown - row["ctr"] * 100) > 0.0051:
                    problems.append(f"{ad}: CTR {ctr_text!r}, API {row['ctr']}")
            final_text = "Final" if row.get("final") else "Not final yet"
            if "final" in row and cells[7] != final_text:
                problems.append(f"{ad}: {cells[7]!r}, API final={row.get('final')}")
        return check(f"the table shows the API's numbers ({label})", not problems and bool(rows),
                     "; ".join(problems) or f"{len(rows)} ads")

    def compare_days(day_listing, label):
        per_day = {}
        for row in day_listing["rows"]:
            day = per_day.setdefault(row["bucket_start"][:10], {"impressions": 0, "clicks": 0, "final": True})
            day["impressions"] += row["impressions"]
            day["clicks"] += row["clicks"]
            day["final"] = day["final"] and row.get("final", True)
        dom = days_in_dom()
        ok = [d["day"] for d in dom] == sorted(per_day) and all(d["bars"] == 3 for d in dom)
        check(f"one bar group per day with data ({label})", ok,
              f"page {[d['day'] for d in dom]}, API {sorted(per_day)}")
        open_days = [d for d in dom if not d["final"]]
        marked = all(d["open"] and d["fill"].startswith("url(") for d in open_days) and \
            all(not d["open"] for d in dom if d["final"])
        api_open = sorted(day for day, v in per_day.items() if not v["final"])
        texts = js("""return [...document.querySelectorAll('#daily-table tbody tr')].map(tr =>
                        [tr.dataset.day, tr.cells[4].textContent.trim()]);""")
        words = all((text == "Not final yet") == (day in api_open) for day, text in texts) and len(texts) == len(per_day)
        legend = "Not final yet" in js("return document.getElementById('daily-legend').textContent")
        missing = "" if all("final" in row for row in day_listing["rows"]) else \
            " (the API's rows have no final member: API 1.3 adds it)"
        check(f"the days not final yet are hatched and said so in words ({label})",
              [d["day"] for d in open_days] == api_open and marked and words and legend and not missing,
              f"not final: page {[d['day'] for d in open_days]}, API {api_open}; hatched {marked}; words {words}{missing}")
        table = js("""return [...document.querySelectorAll('#daily-table tbody tr')].map(tr =>
                        [tr.dataset.day, tr.cells[1].textContent, tr.cells[2].textContent]);""")
        got = {day: (integer(i), integer(c)) for day, i, c in table}
        want = {day: (v["impressions"], v["clicks"]) for day, v in per_day.items()}
        check(f"impressions and clicks per day match the API ({label})", got == want, f"page {got}, API {want}")
        return per_day

    def compare_reasons(day_listing, label):
        want = {code: 0 for code in BUG_REASONS + INVALID_REASONS}
        for row in day_listing["rows"]:
            for group in ("rejections", "duplicates"):
                for code, count in (row.get(group) or {}).items():
                    want[code] = want.get(code, 0) + count
        got = js("""const out = {};
                    for (const id of ['bugs-chart', 'invalid-chart'])
                      for (const g of document.querySelectorAll('#' + id + ' g.reason'))
                        out[g.dataset.reason] = [id, Number(g.dataset.count)];
                    return out;""")
        groups_ok = all(got.get(c, [None])[0] == "bugs-chart" for c in BUG_REASONS) and \
            all(got.get(c, [None])[0] == "invalid-chart" for c in INVALID_REASONS)
        counts = {c: v[1] for c, v in got.items()}
        check(f"not billed per reason, client bugs apart from invalid traffic ({label})",
              groups_ok and all(counts.get(c) == want.get(c, 0) for c in BUG_REASONS + INVALID_REASONS),
              f"page {counts}, API {want}")

    def credit_urls():
        drain_logs()
        return [u for _, u, _ in requests_seen if "/v1/reports/credits?" in u]

    def credits_in_dom():
        return js("""const shown = (id) => document.getElementById(id).getClientRects().length > 0;
                     const text = (id) => document.getElementById(id).textContent.trim();
                     return {
                       rows: [...document.querySelectorAll('#credits-table tbody tr')].map(tr => ({
                         adjustment: tr.dataset.adjustment, ad: tr.dataset.ad, reason: tr.dataset.reason,
                         cells: [...tr.cells].map(td => td.textContent.trim())})),
                       table: shown('credits-table'), empty: shown('credits-empty'), note: shown('credits-note'),
                       head: text('credits-issued-head'),
                       text: Object.fromEntries(['total-impressions', 'total-clicks', 'net-impressions', 'net-clicks',
                         'credit-billable-impressions', 'credit-impressions', 'credit-net-impressions',
                         'credit-billable-clicks', 'credit-clicks', 'credit-net-clicks'].map(id => [id, text(id)]))};""")

    def signed(text):
        """An integer as the page writes it, with its sign (Intl writes a minus as '-' or U+2212)."""
        value = integer(text)
        return None if value is None else (-value if text.strip().startswith(("-", "\u2212")) else value)

    def local_time(instant, zone):
        at = dt.datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
        return at.strftime("%Y-%m-%d %H:%M:%S")

    def compare_credits(page_url, credit_url, totals_listing, zone, label):
        """The credits part against the API's answer to the page's own credits request: the rows in
        order (issued at in the zone's local time), the credited totals, billable and net."""
        page_query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page_url).query))
        credit_query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(credit_url or "").query))
        same = {k: page_query.get(k) for k in ("from", "to", "tz", "advertiser_id")}
        check(f"the page asks for the credits of its range, zone and advertiser ({label})",
              bool(credit_url) and {k: credit_query.get(k) for k in same} == same and credit_query.get("format") == "json"
              and "granularity" not in credit_query, urllib.parse.urlsplit(credit_url or "").query or "no credits request")
        if not credit_url:
            return None
        credits = api_json(credit_url)
        dom = credits_in_dom()
        want = [[r["adjustment_id"], r["reason"], local_time(r["created_at"], zone), r["ad_id"],
                 r["credited_impressions"], r["credited_clicks"]] for r in credits["rows"]]
        got = [[row["cells"][0], row["reason"], row["cells"][2], row["cells"][3], integer(row["cells"][4]), integer(row["cells"][5])]
               for row in dom["rows"]]
        words = all(row["cells"][0] == row["adjustment"] and row["cells"][3] == row["ad"] and row["cells"][1].endswith(row["reason"])
                    for row in dom["rows"])
        check(f"the credits table shows the API's rows in its order, issued at in {zone} local time ({label})",
              got == want and words and dom["table"] == bool(want) and dom["empty"] == (not want)
              and dom["head"] == f"Issued at ({zone.replace('_', ' ')})",
              f"page {got}, API {want}; table shown {dom['table']}, empty state {dom['empty']}, header {dom['head']!r}")
        text = dom["text"]
        api = {"impressions": sum(r["credited_impressions"] for r in credits["rows"]),
               "clicks": sum(r["credited_clicks"] for r in credits["rows"])}
        billable = {"impressions": sum(r["impressions"] for r in totals_listing["rows"]),
                    "clicks": sum(r["clicks"] for r in totals_listing["rows"])}
        shown = {key: [integer(text[f"total-{key}"]), integer(text[f"credit-billable-{key}"]), integer(text[f"credit-{key}"])]
                 for key in api}
        check(f"the credited totals beside the billable ones are the API's ({label})",
              shown == {key: [billable[key], billable[key], api[key]] for key in api},
              "; ".join(f"{key}: billable {shown[key][0]}/{shown[key][1]}, credited {shown[key][2]} "
                        f"(API: billable {billable[key]}, credited {api[key]})" for key in api))
        nets = {}
        for key in api:
            net = signed(text[f"credit-net-{key}"])
            note = text[f"net-{key}"]
            nets[key] = (net, note)
        check(f"the net is billable minus credited, in the summary and the credits ({label})",
              all(nets[key][0] == shown[key][1] - shown[key][2] == billable[key] - api[key]
                  and nets[key][1] == f"credited {text[f'credit-{key}']} · net {text[f'credit-net-{key}']}" for key in api),
              "; ".join(f"{key}: billable {shown[key][1]} − credited {shown[key][2]} = net {nets[key][0]}, "
                        f"summary {nets[key][1]!r}" for key in api))
        return credits

    def shot_credits(name):
        path = os.path.join(work, name)
        element = driver.find_element(By.CSS_SELECTOR, "section[aria-labelledby='credits-title']")
        js("arguments[0].scrollIntoView({block: 'center'});", element)
        element.screenshot(path)
        print(f"      screenshot {path}", flush=True)

    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False})

        # --- The time zone defaults to the browser's.
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
        driver.get(base + "/dashboard")
        zone = wait("zones", lambda: js("const s = document.getElementById('tz'); return s.options.length > 1 && s.value"))
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "UTC"})
        driver.get(base + "/dashboard")
        zone_utc = wait("zones", lambda: js("const s = document.getElementById('tz'); return s.options.length > 1 && s.value"))
        check("the time zone defaults to the browser's (by its current IANA name)", zone == "Asia/Kolkata" and zone_utc == "UTC",
              f"{zone} under Asia/Kolkata, {zone_utc} under UTC")

        # --- The sign-in screen.
        visible = wait("sign-in", lambda: driver.find_element(By.ID, "token").is_displayed()
                       and not driver.find_element(By.ID, "dashboard").is_displayed())
        words = driver.find_element(By.ID, "sign-in").text
        check("before a token, the page shows the token field alone, saying what it is for",
              bool(visible) and "reports" in words and "tab" in words, words.replace("\n", " ")[:160])
        problems = severe("load")
        check("the page loads without console errors", not problems, "; ".join(problems))
        shot("01-sign-in.png")

        # --- The page's date arithmetic against the zone database (DST, midnight jumps, +14, +5:45).
        cases = [("America/New_York", "2026-03-08"), ("America/New_York", "2026-11-01"), ("Europe/Berlin", "2026-03-29"),
                 ("Europe/Berlin", "2026-10-25"), ("America/Havana", "2026-03-08"), ("America/Havana", "2026-11-01"),
                 ("America/Santiago", "2026-09-06"), ("America/Santiago", "2026-04-05"), ("Australia/Lord_Howe", "2026-10-04"),
                 ("Asia/Kathmandu", "2026-06-01"), ("Pacific/Kiritimati", "2026-12-31"), ("Pacific/Pago_Pago", "2026-01-01"),
                 ("Pacific/Chatham", "2026-04-05"), ("UTC", "2026-02-28")]
        mismatches = []
        for zone_name, date in cases:
            page = js("return window.AdTallyDashboard.startOfLocalDay(arguments[0], arguments[1]);", date, zone_name)
            want = start_of_local_day(dt.date.fromisoformat(date), zone_name)
            if page != want:
                mismatches.append(f"{zone_name} {date}: page {page}, zone database {want}")
        check("the start of a local day is right across DST and odd offsets", not mismatches,
              "; ".join(mismatches) or f"{len(cases)} zone days")

        # --- A wrong token.
        set_phase("wrong-token")
        field = driver.find_element(By.ID, "token")
        field.send_keys("wrong-token-0000000000", Keys.ENTER)
        message = wait("error", lambda: driver.find_element(By.ID, "sign-in-error").text)
        check("a wrong token is refused in words", bool(message) and "not accepted" in message
              and driver.find_element(By.ID, "token").is_displayed(), message or "(no message)")
        problems = severe("wrong-token", allowed=["/v1/reports/ads", "401"])
        check("no console error but the refused request", not problems, "; ".join(problems))
        shot("02-wrong-token.png")

        # --- A token without the reports scope (when the caller has one to offer).
        if args.noscope_token:
            set_phase("no-scope")
            driver.find_element(By.ID, "token").send_keys(args.noscope_token, Keys.ENTER)
            message = wait("error", lambda: "scope" in driver.find_element(By.ID, "sign-in-error").text
                           and driver.find_element(By.ID, "sign-in-error").text)
            check("a token without the reports scope is refused in words", bool(message), message or "(no scope message)")

        # --- AdTally unreachable (the browser offline): said in words, and the page recovers.
        set_phase("offline")
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        seen = len(report_urls())
        field = driver.find_element(By.ID, "token")
        field.send_keys(args.token, Keys.ENTER)
        message = wait("unreachable", lambda: driver.find_element(By.ID, "problem").is_displayed() and driver.find_element(By.ID, "problem-text").text)
        check("AdTally unreachable is said in words", bool(message) and "cannot be reached" in message, message or "(no message)")
        shot("03-unreachable.png")
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})

        # --- The right token: the numbers, the bars, the reasons.
        set_phase("signed-in")
        driver.find_element(By.ID, "retry").click()
        page_url = loaded_after(seen)
        check("the right token shows the reports", bool(page_url) and not driver.find_element(By.ID, "problem").is_displayed(),
              page_url or "no listing loaded")
        if not page_url:
            raise RuntimeError("the page never loaded the listing; later checks would say nothing")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page_url).query))
        check("the page asks for the last 7 local days by day, in its zone, from/to in UTC",
              query.get("granularity") == "day" and query.get("tz") == "UTC" and query.get("from", "").endswith("Z")
              and (dt.datetime.fromisoformat(query["to"].replace("Z", "+00:00")) - dt.datetime.fromisoformat(query["from"].replace("Z", "+00:00"))) == dt.timedelta(days=7),
              urllib.parse.urlsplit(page_url).query)
        totals = api_json(page_url, granularity="total")
        days_listing = api_json(page_url)
        compare_table(totals, "UTC")
        compare_days(days_listing, "UTC")
        compare_reasons(days_listing, "UTC")
        if expected:
            want = {}
            for event in expected["events"]:
                counts = want.setdefault(event["ad_id"], empty_counts())
                count_outcome(counts, event["type"], event["status"])
            got = {r["ad_id"]: {k: r[k] for k in COUNT_KEYS} for r in totals["rows"]}
            check("the API counts exactly the fixture's events", got == want, f"API {got}, fixture {want}")
            dom = {cells[0]: [integer(cells[2]), integer(cells[3])] for cells in ads_in_dom()}
            check("the table shows the fixture's billable counts", dom == {ad: [c["impressions"], c["clicks"]] for ad, c in want.items()},
                  f"page {dom}")
            finals = [d["final"] for d in days_in_dom()]
            check("the fixture has final days and a day not final yet", any(finals) and not all(finals), f"{finals}")
        credit_url = (credit_urls() or [None])[-1]
        credits = compare_credits(page_url, credit_url, totals, "UTC", "UTC")
        if expected and credits is not None:
            want = sorted((a["adjustment_id"], a["reason"], a["created_at"], ad["ad_id"], ad["credited_impressions"], ad["credited_clicks"])
                          for a in expected["credits"] for ad in a["ads"])
            got = sorted((r["adjustment_id"], r["reason"], r["created_at"], r["ad_id"], r["credited_impressions"], r["credited_clicks"])
                         for r in credits["rows"])
            on_page = sorted((row["adjustment"], row["ad"]) for row in credits_in_dom()["rows"])
            check("the credits of the range are exactly the fixture's adjustments, on the page and in the API",
                  got == want and on_page == [(w[0], w[3]) for w in want], f"API {got}, fixture {want}, page {on_page}")
        problems = severe("signed-in")
        check("no console error while showing the reports", not problems, "; ".join(problems))
        shot("04-reports-1440.png")
        shot_credits("04a-credits.png")

        # --- Sorting, by pointer and by keyboard.
        def order(column):
            return [cells[column] for cells in ads_in_dom()]
        header = driver.find_element(By.CSS_SELECTOR, "#ads-table th[data-key='clicks'] button")
        header.click()
        first = (js("return document.querySelector(\"#ads-table th[data-key='clicks']\").getAttribute('aria-sort')"), [integer(x) for x in order(3)])
        header.send_keys(Keys.ENTER)
        second = (js("return document.querySelector(\"#ads-table th[data-key='clicks']\").getAttribute('aria-sort')"), [integer(x) for x in order(3)])
        driver.find_element(By.CSS_SELECTOR, "#ads-table th[data-key='ad_id'] button").send_keys(Keys.SPACE)
        third = (js("return document.querySelector(\"#ads-table th[data-key='ad_id']\").getAttribute('aria-sort')"), order(0))
        check("the table sorts by clicking or pressing a column's button, with aria-sort",
              first[0] == "descending" and first[1] == sorted(first[1], reverse=True)
              and second[0] == "ascending" and second[1] == sorted(second[1])
              and third[0] == "ascending" and third[1] == sorted(third[1], key=lambda s: s.encode()),
              f"{first}, {second}, {third}")

        # --- The CSV download: the same rows as the API's CSV.
        for name in os.listdir(downloads):
            os.remove(os.path.join(downloads, name))
        driver.find_element(By.ID, "download-csv").click()

        def downloaded():
            names = [n for n in os.listdir(downloads) if n.endswith(".csv")]
            return names[0] if names else None
        name = wait("download", downloaded, 20)
        api_csv = api_json(page_url, granularity="total", format="csv")
        if name:
            time.sleep(0.2)
            with open(os.path.join(downloads, name), "rb") as f:
                file_bytes = f.read()
        else:
            file_bytes = b""
        rows = list(csv.reader(io.StringIO(file_bytes.decode("utf-8", "replace"))))
        check("the CSV button downloads the API's CSV of the same listing", bool(name) and file_bytes == api_csv,
              f"{name}: {len(rows) - 1} rows" if name else "no file downloaded in 20 s")
        for name in os.listdir(downloads):
            os.remove(os.path.join(downloads, name))
        driver.find_element(By.ID, "download-credits-csv").click()
        name = wait("download", downloaded, 20)
        api_csv = api_json(credit_url, format="csv") if credit_url else b""
        file_bytes = b""
        if name:
            time.sleep(0.2)
            with open(os.path.join(downloads, name), "rb") as f:
                file_bytes = f.read()
        lines = file_bytes.count(b"\r\n")
        check("the credits CSV button downloads the API's CSV of the same credits",
              bool(name) and name.startswith("adtally-credits-") and file_bytes == api_csv and lines > 1,
              f"{name}: {lines - 1} rows" if name else "no file downloaded in 20 s")
        problems = severe("signed-in")
        check("the download raised no console error (CSP allows it)", not problems, "; ".join(problems))

        # --- Credits of one advertiser, and a range with none (the fixture's credits are all issued today).
        if expected:
            seen = len(report_urls())
            field = driver.find_element(By.ID, "advertiser")
            field.clear()
            field.send_keys("globex", Keys.ENTER)
            globex_url = loaded_after(seen)
            if globex_url:
                credits = compare_credits(globex_url, (credit_urls() or [None])[-1], api_json(globex_url, granularity="total"),
                                          "UTC", "advertiser globex")
                want = [(a["adjustment_id"], ad["ad_id"]) for a in expected["credits"] for ad in a["ads"]
                        if ADVERTISERS[ad["ad_id"]] == "globex"]
                on_page = [(row["adjustment"], row["ad"]) for row in credits_in_dom()["rows"]]
                check("an advertiser's view shows its credits only", bool(want) and on_page == want
                      and [(r["adjustment_id"], r["ad_id"]) for r in (credits or {"rows": []})["rows"]] == want,
                      f"page {on_page}, fixture {want}")
                shot_credits("04b-credits-globex.png")
            else:
                check("an advertiser's view shows its credits only", False, "no listing loaded")
            seen = len(report_urls())
            Select(driver.find_element(By.ID, "range")).select_by_value("last-month")
            none_url = loaded_after(seen)
            if none_url:
                credits = compare_credits(none_url, (credit_urls() or [None])[-1], api_json(none_url, granularity="total"),
                                          "UTC", "last month")
                dom = credits_in_dom()
                check("a range without credits says so, and credits nothing", credits is not None and not credits["rows"]
                      and dom["empty"] and not dom["table"] and dom["text"]["credit-impressions"] == "0"
                      and dom["text"]["credit-clicks"] == "0", f"rows {len(dom['rows'])}, empty state {dom['empty']}")
                shot_credits("04c-credits-none.png")
            else:
                check("a range without credits says so, and credits nothing", False, "no listing loaded")
            seen = len(report_urls())
            driver.find_element(By.ID, "advertiser").clear()
            Select(driver.find_element(By.ID, "range")).select_by_value("7")
            back = loaded_after(seen)
            back_query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(back or "").query))
            check("back to the last 7 days of every advertiser", bool(back) and "advertiser_id" not in back_query,
                  back or "no listing loaded")
            problems = severe("signed-in")
            check("no console error while changing advertiser and range", not problems, "; ".join(problems))

        # --- Another time zone moves the days.
        set_phase("later")
        fixture_time = dt.datetime.fromisoformat(expected["fixture_time"].replace("Z", "+00:00")) if expected else dt.datetime.now(UTC)
        far = "Pacific/Pago_Pago" if fixture_time.hour + fixture_time.minute / 60 < 10.5 else "Pacific/Kiritimati"
        seen = len(report_urls())
        Select(driver.find_element(By.ID, "tz")).select_by_value(far)
        far_url = loaded_after(seen)
        far_query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(far_url or "").query))
        check(f"choosing {far} asks for its local days", bool(far_url) and far_query.get("tz") == far, far_url or "no listing loaded")
        if far_url:
            utc_days = sorted({r["bucket_start"][:10] for r in days_listing["rows"]})
            far_listing = api_json(far_url)
            per_day = compare_days(far_listing, far)
            compare_table(api_json(far_url, granularity="total"), far)
            open_utc = sorted(r["bucket_start"][:10] for r in days_listing["rows"] if r.get("final") is False)
            open_far = sorted(day for day, v in per_day.items() if not v["final"])
            offsets = {r["bucket_start"][-6:] for r in far_listing["rows"]}
            check("the time zone changes the days, and today's local day", sorted(per_day) != utc_days and open_far != open_utc
                  and offsets <= {"+14:00", "-11:00"}, f"UTC days {utc_days}, {far} days {sorted(per_day)}, offsets {sorted(offsets)}")
            compare_credits(far_url, (credit_urls() or [None])[-1], api_json(far_url, granularity="total"), far, far)
        shot("05-reports-far-zone.png")

        # --- A phone, 360 px wide: nothing overflows sideways.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 360, "height": 780, "deviceScaleFactor": 1, "mobile": True})
        seen = len(report_urls())
        driver.refresh()  # the token stays: sessionStorage belongs to the tab
        loaded_after(seen)
        sizes = js("return [document.documentElement.scrollWidth, window.innerWidth, document.querySelector('.table-scroll #ads-table') !== null];")
        check("at 360 px wide nothing overflows horizontally", sizes[0] <= sizes[1] and sizes[1] == 360, f"scrollWidth {sizes[0]}, innerWidth {sizes[1]}")
        shot("06-reports-360.png")
        shot_credits("06a-credits-360.png")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False})

        # --- Keyboard: every control is reachable, and focus is visible.
        driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
        reached = []
        for _ in range(70):
            driver.switch_to.active_element.send_keys(Keys.TAB)
            here = js("""const e = document.activeElement; const s = getComputedStyle(e);
                         return [e.id || e.textContent.trim().slice(0, 20), s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2, e.tagName];""")
            if here[2] not in ("BODY", "HTML"):
                reached.append(here)
        names = [r[0] for r in reached]
        wanted = ["sign-out", "range", "from", "to", "tz", "advertiser", "download-csv", "Clicks", "download-credits-csv",
                  "credits-scroll"]
        check("the keyboard reaches every control, with a visible focus ring",
              all(w in names for w in wanted) and all(r[1] for r in reached),
              f"missing {[w for w in wanted if w not in names]}, without ring {[r[0] for r in reached if not r[1]][:5]}")

        # --- The dark colour scheme (the colours' contrast ratios are in dashboard.css).
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        background = js("return getComputedStyle(document.body).backgroundColor")
        check("the page follows a dark colour scheme", background == "rgb(17, 20, 24)", background)
        shot("07-reports-dark.png")
        shot_credits("07a-credits-dark.png")
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

        # --- Signing out forgets the token.
        driver.find_element(By.ID, "sign-out").click()
        gone = wait("sign-out", lambda: driver.find_element(By.ID, "token").is_displayed()
                    and js("return sessionStorage.length === 0"))
        check("signing out forgets the token", bool(gone))
        shot("08-signed-out.png")

        problems = severe("later")
        check("no console error while changing zone, width and signing out", not problems, "; ".join(problems))

        # --- An advertiser's key (API 1.5): the same page, its ads only, no other advertiser anywhere.
        if args.advertiser_key:
            set_phase("advertiser-key")
            advertiser, key = args.advertiser_key.split(":", 1)
            seen = len(report_urls())
            driver.find_element(By.ID, "token").send_keys(key, Keys.ENTER)
            key_url = loaded_after(seen)
            check("an advertiser key signs in and shows the reports", bool(key_url) and not driver.find_element(By.ID, "problem").is_displayed(),
                  key_url or "no listing loaded")
            if key_url:
                everyone = api_json(key_url, credential=args.token, granularity="total")
                own = sorted(r["ad_id"] for r in everyone["rows"] if r["advertiser_id"] == advertiser)
                others = sorted({r["advertiser_id"] for r in everyone["rows"] if r["advertiser_id"] and r["advertiser_id"] != advertiser} |
                                {r["ad_id"] for r in everyone["rows"] if r["advertiser_id"] != advertiser})
                on_page = sorted(cells[0] for cells in ads_in_dom())
                check(f"with {advertiser}'s key the table lists its ads, the admin's rows of {advertiser}", bool(own) and on_page == own,
                      f"page {on_page}, admin's rows of {advertiser} {own}")
                compare_table(api_json(key_url, credential=key, granularity="total"), f"{advertiser}'s key")
                page_text = js("return document.body.innerText + ' ' + document.documentElement.outerHTML")
                named = [name for name in others if name in page_text]
                check("no other advertiser's name or ad anywhere on the page", bool(others) and not named,
                      f"named: {named}" if named else f"none of {others}")
                label = driver.find_element(By.ID, "range-label").text
                check("the view says it is the advertiser's own ads", "your ads" in label, label)
                shot("09-advertiser-key.png")
                # Asking for another advertiser is refused in words, and names nothing of theirs.
                seen = len(report_urls())
                field = driver.find_element(By.ID, "advertiser")
                field.clear()
                other = next(o for o in others if not o.startswith("ad-"))
                field.send_keys(other, Keys.ENTER)
                message = wait("refusal", lambda: driver.find_element(By.ID, "problem").is_displayed() and driver.find_element(By.ID, "problem-text").text)
                check("another advertiser's reports are refused in words", bool(message) and "advertiser key" in message, message or "(no message)")
                shot("10-advertiser-key-other.png")
            driver.find_element(By.ID, "sign-out").click()
            wait("sign-out", lambda: driver.find_element(By.ID, "token").is_displayed())
            problems = severe("advertiser-key", allowed=["/v1/reports/", "403"])
            check("no console error with an advertiser key but the refused request", not problems, "; ".join(problems))

        # --- Nothing from another origin, in any phase.
        drain_logs()
        # The page's requests (those of a document of its origin) must all stay there; and no
        # request at all, whoever made it, may leave for another host on the network.
        ours = [(u, d) for _, u, d in requests_seen if d.startswith(origin + "/")]
        foreign = sorted({u for u, _ in ours if not (u.startswith(origin + "/") or u.startswith(("data:", "blob:")))} |
                         {u for _, u, _ in requests_seen if u.startswith(("http:", "https:", "ws:", "wss:")) and not u.startswith(origin + "/")})
        check("no request to another origin", not foreign and len(ours) > 0,
              "; ".join(foreign) or f"{len(ours)} requests of the page, all to {origin}")
    except WebDriverException as error:
        check("the browser session", False, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    except RuntimeError as error:
        check("the browser session", False, str(error))
    finally:
        try:
            driver.quit()
        except Exception:
            pass
    print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
    return 0 if checks.failed == 0 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("seed-past")
    p.add_argument("--database-url", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("fixture")
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--past", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("browser")
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--expect")
    p.add_argument("--noscope-token", help="a known token without the reports scope: checks the 403 words")
    p.add_argument("--advertiser-key", help="ADVERTISER:KEY, an advertiser key: checks the page shows that advertiser's ads only")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    return {"seed-past": seed_past, "fixture": fixture, "browser": browser}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
