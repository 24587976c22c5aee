-- AdTally schema, version 4: what the tap rule and the grace window read, and replays answered
-- from the idempotency ledger alone.
--
-- * sessions.last_click_*: the session's last accepted click (the one accepted last, on any ad), which
--   the tap rule compares a new click with ("one tap, one click, across ads"). Written only by a
--   transaction that holds the session's row lock, as every click decision does.
-- * snapshots.replaced_at: when the snapshot that replaced this one was registered (null while it is
--   current), so that a click naming an earlier snapshot can be judged against it when the tap
--   happened while it was current (the grace window). Set by the registration that replaces it.
-- * event_ids.status / reason: the outcome an event was answered with, so that a replay is answered
--   from its ledger row without reading events (another table, distributed by session_id on Citus,
--   and partitioned by received_at later).
--
-- Every statement here rewrites or scans the tables it changes under ACCESS EXCLUSIVE locks, which
-- block ingestion and feed registration until the migration commits: on a large database, stop the
-- older processes (they would fail on the new NOT NULL columns anyway) and expect a pause that
-- grows with event_ids (one update per ledger row).

LOCK TABLE sessions, snapshots, event_ids IN ACCESS EXCLUSIVE MODE;

ALTER TABLE sessions
    ADD COLUMN last_click_ad_id       text COLLATE "C",
    ADD COLUMN last_click_occurred_at timestamptz,
    ADD CONSTRAINT sessions_last_click_check CHECK ((last_click_ad_id IS NULL) = (last_click_occurred_at IS NULL));

-- Only a click received in the last 8 days can be within the tap window (60 s at most) of a new
-- click, whose occurred_at lies at most 7 days in the past: older ones need not be looked at.
UPDATE sessions s SET last_click_ad_id = l.ad_id, last_click_occurred_at = l.occurred_at
FROM (SELECT DISTINCT ON (e.session_id) e.session_id, e.ad_id, e.occurred_at
      FROM events e
      WHERE e.type = 'click' AND e.status = 'accepted' AND e.received_at > now() - interval '8 days'
      ORDER BY e.session_id, e.received_at DESC, e.occurred_at DESC) l
WHERE s.session_id = l.session_id;

ALTER TABLE snapshots ADD COLUMN replaced_at timestamptz;

-- Snapshots became current in the order they were registered; each one but the current was
-- replaced by the next.
UPDATE snapshots sn SET replaced_at = coalesce(n.next_registered_at, s.current_since)
FROM (SELECT x.session_id, x.snapshot_id,
             lead(x.registered_at) OVER (PARTITION BY x.session_id
                                         ORDER BY x.registered_at, x.snapshot_id = c.current_snapshot_id, x.snapshot_id) AS next_registered_at
      FROM snapshots x
      JOIN sessions c ON c.session_id = x.session_id) n
JOIN sessions s ON s.session_id = n.session_id
WHERE sn.session_id = n.session_id AND sn.snapshot_id = n.snapshot_id
  AND sn.snapshot_id IS DISTINCT FROM s.current_snapshot_id;

ALTER TABLE event_ids
    ADD COLUMN status text,
    ADD COLUMN reason text;

UPDATE event_ids i SET status = e.status, reason = e.reason
FROM events e
WHERE e.ad_id = i.ad_id AND e.received_at = i.received_at AND e.event_id = i.event_id;

-- A ledger row without its event cannot exist (both are written in one transaction); should one
-- exist anyway, this refuses the migration rather than leave a replay without an answer.
ALTER TABLE event_ids
    ALTER COLUMN status SET NOT NULL,
    ADD CONSTRAINT event_ids_status_check CHECK (status IN ('accepted', 'duplicate', 'rejected')),
    ADD CONSTRAINT event_ids_reason_check CHECK ((status = 'accepted') = (reason IS NULL));
