"""Schemathesis hooks of scripts/schemathesis (loaded through SCHEMATHESIS_HOOKS).

A request that matches docs/openapi.yaml can still be refused by rules that JSON Schema cannot say:
an id that names one thing forever, a time that must lie near the server's clock, uniqueness by key.
Generated data breaks those rules nearly every time (Hypothesis reuses small values such as "0", and
draws times from years 0000 to 9999), so the operations' logic behind those rules went untested:
Schemathesis warned that they "mostly rejected generated data". Before each request, this file
mends the *positive* parts of a case (those Schemathesis generated to match the schema) so that they
also keep those rules, and keeps them valid against the schema (Schemathesis validates a case again
after a hook changed it). Negative parts are never touched, so every refusal is still tested.

- DELETE /v1/sessions/{session_id} erases the session for good (API.md section 12: its feed then
  answers 410 forever). Generated session ids are short and shared by every operation, so one erasure
  of "0" made every later PUT and GET of the feed of "0" a 410. The run erases only sessions of its
  own, whose ids start with `erased~`: one PUT of a feed in eight registers to such a session, which
  the next erasure erases (so that it deletes a snapshot), else the erasure's generated id gets the
  prefix; and one GET, HEAD or PUT of a feed in eight addresses a session the run erased, so that
  the 410 is still reached.
- PUT /v1/sessions/{session_id}/feed: a `snapshot_id` names one feed forever (section 1), so the
  run's snapshot ids get a suffix unique in the run (else 409 snapshot_conflict); a position written
  `3.0` (JSON Schema's integer, not the contract's) is written `3`; an ad that repeats an earlier
  entry's `ad_id` or `position` is left out (the contract refuses it with 422; `uniqueItems` cannot
  say "unique by key").
- POST /v1/adjustments: an `adjustment_id` names one request forever (section 10), so it gets a
  unique suffix (else 409 adjustment_conflict); `from` and `to` must lie between the raw-event
  retention horizon (now - 90 days) and `final_before` (at most about 60 s before now), `from`
  before `to`: their dates are moved to 3 to 80 days before today (UTC), keeping the generated time
  of day, fraction and offset, and the two are swapped when `from` is not before `to`.
- POST /v1/events: `occurred_at` must lie within [now - 7 days, now + 10 minutes] (rule 1), else the
  event is `rejected`, `invalid_event` and rules 2 to 4 never run: its date is moved to 3 to 5 days
  before today (UTC), as above; a `position` or `visible_ms` written `3.0` is written `3`. A valid
  `event_id` is replaced by a fresh UUID: Hypothesis draws the same few, and an id the session used
  for another event is `event_id_conflict` (rule 2), which then hid rules 3 and 4. One event in two
  is moved to an ad of a feed the run registered (its session and ad, and its snapshot and position
  when it names them), so that rules 3 and 4 can accept it, not only refuse an ad never served.
"""

import datetime
import itertools
import re
import secrets
import uuid

import schemathesis
from schemathesis.core.parameters import ParameterLocation

IDENTIFIER = re.compile(r"[A-Za-z0-9._:~-]{1,128}")
# Timestamp of docs/openapi.yaml: the date, then the rest (time of day, fraction, offset).
TIMESTAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})([Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?([Zz]|([+-])([0-9]{2}):([0-9]{2})))")
ERASED = "erased~"
RUN = secrets.token_hex(3)  # a database given with DATABASE_URL outlives a run
_serial = 0


def _fresh(value):
    """A valid identifier made unique in the run (the generated one, shortened as needed, and a suffix)."""
    global _serial
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        return value
    _serial += 1
    suffix = f"~{RUN}.{_serial}"
    return value[: 128 - len(suffix)] + suffix


def _integral(value):
    """`3.0` as `3`: the same number for JSON Schema, but the contract wants a JSON integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _seconds(text):
    """Seconds since the epoch of an RFC 3339 time (a leap second as :59), or None."""
    match = TIMESTAMP.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    date, _, hours, minutes, seconds, _, sign, offset_hours, offset_minutes = match.groups()
    try:
        day = datetime.date.fromisoformat(date)
    except ValueError:
        return None
    offset = 0
    if sign is not None:
        offset = (1 if sign == "+" else -1) * (int(offset_hours) * 3600 + int(offset_minutes) * 60)
    clock = int(hours) * 3600 + int(minutes) * 60 + min(int(seconds), 59)
    return (day - datetime.date(1970, 1, 1)).days * 86400 + clock - offset


def _dated(text, days_before_today):
    """The time with its date replaced by today (UTC) minus `days_before_today`, the rest as generated."""
    match = TIMESTAMP.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return text
    day = datetime.datetime.now(datetime.timezone.utc).date() - datetime.timedelta(days=days_before_today)
    return day.isoformat() + match.group(2)


def _positive(case, location):
    meta = case.meta
    return meta is None or not meta.is_negative_at(location)


# The run's own sessions to erase: an erasure is refused for good (410), so the run erases only
# sessions whose ids start with ERASED, which generated data all but never uses. Some feeds are
# registered to such sessions first, so that an erasure also deletes something; some reads and
# registrations of a feed address a session erased before, so that the 410 is reached.
_doomed = []  # sessions under ERASED with a registered feed, not erased yet
_erased = []  # sessions the run erased (answered 200)
_turn = itertools.count()


def _erase_session(case):
    if not _positive(case, ParameterLocation.PATH):
        return
    session = case.path_parameters.get("session_id")
    if not isinstance(session, str) or not IDENTIFIER.fullmatch(session) or session.startswith(ERASED):
        return
    case.path_parameters["session_id"] = _doomed.pop() if _doomed else (ERASED + session)[:128]


def _feed_session(case):
    """One case in eight addresses a session erased before; one PUT in eight registers to ERASED."""
    if not _positive(case, ParameterLocation.PATH):
        return
    session = case.path_parameters.get("session_id")
    if not isinstance(session, str) or not IDENTIFIER.fullmatch(session):
        return
    turn = next(_turn)
    if turn % 8 == 3 and _erased:
        case.path_parameters["session_id"] = _erased[(turn // 8) % len(_erased)]
    elif turn % 8 == 7 and case.method.upper() == "PUT" and not session.startswith(ERASED):
        case.path_parameters["session_id"] = _fresh((ERASED + session)[:128])


def _put_feed(case):
    _feed_session(case)
    body = case.body
    if not _positive(case, ParameterLocation.BODY) or not isinstance(body, dict):
        return
    if "snapshot_id" in body:
        body["snapshot_id"] = _fresh(body["snapshot_id"])
    ads = body.get("ads")
    if isinstance(ads, list):
        kept, ad_ids, positions = [], set(), set()
        for ad in ads:
            if isinstance(ad, dict):
                if "position" in ad:
                    ad["position"] = _integral(ad["position"])
                ad_id, position = ad.get("ad_id"), ad.get("position")
                if (isinstance(ad_id, str) and ad_id in ad_ids) or (type(position) is int and position in positions):
                    continue
                if isinstance(ad_id, str):
                    ad_ids.add(ad_id)
                if type(position) is int:
                    positions.add(position)
            kept.append(ad)
        body["ads"] = kept


def _make_adjustment(case):
    body = case.body
    if not _positive(case, ParameterLocation.BODY) or not isinstance(body, dict):
        return
    if "adjustment_id" in body:
        body["adjustment_id"] = _fresh(body["adjustment_id"])
    start, end = body.get("from"), body.get("to")
    if _seconds(start) is None or _seconds(end) is None:
        return
    # Spread over 3 to 80 days before today, by the generated values.
    start = _dated(start, 3 + sum(map(ord, start)) % 78)
    end = _dated(end, 3 + sum(map(ord, end)) % 78)
    if _seconds(start) == _seconds(end):
        end = _dated(end, 3 + (sum(map(ord, end)) + 1) % 78)
    if _seconds(start) > _seconds(end):
        start, end = end, start
    body["from"], body["to"] = start, end


UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
# Feeds the run registered (201): (session_id, snapshot_id, [(ad_id, position), ...]), the latest 64.
_feeds = []
_event_turn = itertools.count()


def _event(event):
    if not isinstance(event, dict):
        return
    if "occurred_at" in event and _seconds(event["occurred_at"]) is not None:
        event["occurred_at"] = _dated(event["occurred_at"], 3 + sum(map(ord, event["occurred_at"])) % 3)
    for name in ("position", "visible_ms"):
        if name in event:
            event[name] = _integral(event[name])
    event_id = event.get("event_id")
    if isinstance(event_id, str) and UUID.fullmatch(event_id):
        fresh = str(uuid.uuid4())
        event["event_id"] = fresh.upper() if event_id.isupper() else fresh
    turn = next(_event_turn)
    session, ad_id = event.get("session_id"), event.get("ad_id")
    if turn % 2 == 0 and _feeds and isinstance(session, str) and IDENTIFIER.fullmatch(session) \
            and isinstance(ad_id, str) and IDENTIFIER.fullmatch(ad_id):
        session, snapshot, ads = _feeds[(turn // 2) % len(_feeds)]
        ad_id, position = ads[(turn // 2) % len(ads)]
        event["session_id"], event["ad_id"] = session, ad_id
        if isinstance(event.get("snapshot_id"), str):
            event["snapshot_id"] = snapshot
        if type(event.get("position")) is int:
            event["position"] = position


def _post_events(case):
    body = case.body
    if not _positive(case, ParameterLocation.BODY) or not isinstance(body, dict):
        return
    events = body.get("events")
    if "events" not in body:
        _event(body)
    elif isinstance(events, list):
        for event in events:
            _event(event)


PUT_FEED = ("PUT", "/v1/sessions/{session_id}/feed")
ERASE = ("DELETE", "/v1/sessions/{session_id}")
MENDERS = {
    ERASE: _erase_session,
    PUT_FEED: _put_feed,
    ("GET", "/v1/sessions/{session_id}/feed"): _feed_session,
    ("HEAD", "/v1/sessions/{session_id}/feed"): _feed_session,
    ("POST", "/v1/adjustments"): _make_adjustment,
    ("POST", "/v1/events"): _post_events,
}


@schemathesis.hook
def before_call(context, case, **kwargs):
    mend = MENDERS.get((case.method.upper(), case.operation.path))
    if mend is not None:
        mend(case)


@schemathesis.hook
def after_call(context, case, response):
    operation = (case.method.upper(), case.operation.path)
    session = (case.path_parameters or {}).get("session_id")
    if operation == PUT_FEED and response.status_code == 201 and isinstance(case.body, dict):
        ads = [(ad.get("ad_id"), ad.get("position")) for ad in case.body.get("ads") or [] if isinstance(ad, dict)]
        if ads:
            _feeds.append((session, case.body.get("snapshot_id"), ads))
            del _feeds[:-64]
    if not isinstance(session, str) or not session.startswith(ERASED):
        return
    if operation == PUT_FEED and response.status_code == 201:
        _doomed.append(session)
    elif operation == ERASE and response.status_code == 200 and session not in _erased:
        _erased.append(session)
