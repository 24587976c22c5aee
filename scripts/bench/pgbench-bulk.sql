-- pgbench script for scripts/bench-ingest: the bulk-write ceiling. The same two rows per event as
-- pgbench-insert.sql (event_ids + events), but 2,000 events per transaction in one statement: what
-- PostgreSQL itself sustains for AdTally's writes when commits cost nothing, with no rule checks, no
-- HTTP and no JSON. A batch of AdTally events cannot go faster than this.
\set base random(1, :sessions)
WITH id AS (
    INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
    SELECT gen_random_uuid(), 'pgb-' || ((:base + g) % :sessions + 1), CASE WHEN g % 10 = 0 THEN 'click' ELSE 'impression' END,
           'ad-' || (g % 1000), clock_timestamp(), 'duplicate', 'impression_already_counted'
    FROM generate_series(1, 2000) AS g
    RETURNING event_id, session_id, type, ad_id, received_at
)
INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                    snapshot_id, position, visible_fraction, visible_ms)
SELECT session_id, event_id, type, ad_id, 'duplicate', 'impression_already_counted', now(), received_at,
       'snap-' || session_id, 3, 0.8, 1200
FROM id;
