-- AdTally schema, version 3: one row per (session, ad) holds everything the counting rules ask.
--
-- Deciding an event used to take four index probes per (session, ad) pair: the session's current
-- snapshot (sessions), the ad's rows in the session's snapshots (snapshot_ads), the impression
-- claim (impression_claims) and the click window (click_windows). session_ads answers all of them
-- with one probe of its primary key, which measured as half the cost of that statement with
-- scripts/bench-ingest's batches.
--
-- A row exists once the ad was in any snapshot registered for the session ("served"), and is
-- never deleted. Feed registration keeps current_snapshot_id / current_position equal to the ad's
-- row in the session's current snapshot (null when the ad is not in it), in the same transaction
-- that makes the snapshot current. An impression claim and a click window are columns of the row,
-- changed by a conditional upsert that takes the row lock, so concurrent transactions in any
-- number of processes still decide each pair one at a time. snapshots and snapshot_ads remain
-- the record of what was registered (GET /v1/sessions/{id}/feed and the advertiser rule).

-- Nothing may claim or register while the claims move: writers of the tables read or dropped
-- here (an AdTally process of version 2 still running) wait, then fail on the dropped tables,
-- and their clients retry. Stop version-2 processes before starting version 3 to avoid that.
LOCK TABLE sessions, snapshot_ads, impression_claims, click_windows IN ACCESS EXCLUSIVE MODE;

CREATE TABLE session_ads (
    session_id             text COLLATE "C" NOT NULL,
    ad_id                  text COLLATE "C" NOT NULL,
    -- When the ad was first in a snapshot registered for the session. No default: only feed
    -- registration creates rows, so a claim can never insert one by mistake.
    first_served_at        timestamptz NOT NULL,
    current_snapshot_id    text COLLATE "C",
    current_position       integer,
    impression_event_id    uuid,
    impression_claimed_at  timestamptz,
    -- The last accepted click; the event id is null for windows opened before version 3.
    last_click_event_id    uuid,
    last_click_at          timestamptz,
    PRIMARY KEY (session_id, ad_id),
    CHECK ((current_snapshot_id IS NULL) = (current_position IS NULL)),
    CHECK ((impression_event_id IS NULL) = (impression_claimed_at IS NULL)),
    CHECK (last_click_event_id IS NULL OR last_click_at IS NOT NULL)
) WITH (fillfactor = 80);  -- room on the page for claim updates to stay heap-only (HOT)

INSERT INTO session_ads (session_id, ad_id, first_served_at, current_snapshot_id, current_position,
                         impression_event_id, impression_claimed_at, last_click_at)
SELECT p.session_id, p.ad_id, p.first_served_at, cur.snapshot_id, cur.position, c.event_id, c.claimed_at, w.last_accepted_at
FROM (SELECT a.session_id, a.ad_id, min(sn.registered_at) AS first_served_at
      FROM snapshot_ads a
      JOIN snapshots sn ON sn.session_id = a.session_id AND sn.snapshot_id = a.snapshot_id
      GROUP BY a.session_id, a.ad_id) p
LEFT JOIN sessions s ON s.session_id = p.session_id
LEFT JOIN snapshot_ads cur ON cur.session_id = p.session_id AND cur.snapshot_id = s.current_snapshot_id AND cur.ad_id = p.ad_id
LEFT JOIN impression_claims c ON c.session_id = p.session_id AND c.ad_id = p.ad_id
LEFT JOIN click_windows w ON w.session_id = p.session_id AND w.ad_id = p.ad_id;

-- A claim for an ad never served to its session cannot exist (claims follow the feed rules);
-- should one exist anyway, refuse the upgrade rather than drop a count.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM impression_claims c
               WHERE NOT EXISTS (SELECT 1 FROM session_ads x WHERE x.session_id = c.session_id AND x.ad_id = c.ad_id))
       OR EXISTS (SELECT 1 FROM click_windows w
                  WHERE NOT EXISTS (SELECT 1 FROM session_ads x WHERE x.session_id = w.session_id AND x.ad_id = w.ad_id)) THEN
        RAISE EXCEPTION 'a claim names an ad never served to its session; not migrating';
    END IF;
END
$$;

DROP TABLE impression_claims;
DROP TABLE click_windows;

-- It served the per-event probe of snapshot_ads, which session_ads replaces.
DROP INDEX snapshot_ads_served_idx;
