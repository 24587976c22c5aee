-- pgbench script for scripts/bench-ingest: the durable-write ceiling. One transaction per event
-- (autocommit, one statement): claim a random event_id in event_ids and store the event row in events,
-- the two rows AdTally writes for every event it stores (it also updates the pair's session_ads row
-- for impressions and clicks that pass the feed rules; not done here).
-- 90% impressions, 10% clicks, over :sessions sessions of :ads ads (the ad function of bench-ingest).
\set i random(1, :sessions)
\set j random(0, :ads - 1)
\set k (:i + :j * (1000 / :ads)) % 1000
\set r random(1, 10)
WITH id AS (
    INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
    VALUES (gen_random_uuid(), 'pgb-' || :i, CASE WHEN :r = 10 THEN 'click' ELSE 'impression' END, 'ad-' || :k, clock_timestamp(),
            'accepted', NULL)
    RETURNING event_id, session_id, type, ad_id, received_at
)
INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                    snapshot_id, position, visible_fraction, visible_ms)
SELECT session_id, event_id, type, ad_id, 'accepted', NULL, now(), received_at,
       'snap-' || session_id, :j * 5 + 3, 0.8, 1200
FROM id;
