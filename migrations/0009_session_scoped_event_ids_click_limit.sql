-- AdTally schema, version 9 (API 1.3): an event id is scoped to its session, and a session counts
-- its accepted clicks per UTC clock hour.
--
-- 1. event_ids' primary key becomes (session_id, event_id): the same id in another session is
--    another event (API.md rule 2, revised), and the ledger is keyed like every other row of a
--    session, so that on Citus it lives on the session's shard (colocated with sessions) and a
--    transaction that stores one session's events touches one shard. Every stored row stays as it
--    is, with its outcome: a replay of an event stored before this migration is answered from it,
--    as before (its session was always recorded beside its id).
-- 2. sessions.click_hour and sessions.clicks_in_hour: the session's accepted clicks in one UTC
--    clock hour, read and written under the session's row lock with the rest of its click state
--    (ADTALLY_SESSION_CLICK_LIMIT), at no extra statement per click.
--
-- Locks and duration on a large database: event_ids is locked ACCESS EXCLUSIVE while its primary
-- key is built again, which reads the ledger once and sorts it: measured at about 1.5 s per
-- million rows on a 2-core development machine (the ledger holds about a week of events: rule 1
-- refuses older ones, and maintenance prunes the rest). Ingestion waits for it; reports do not read
-- the ledger. The new columns of sessions have constant defaults: a change of the catalog only, no
-- rewrite. On Citus the ledger is moved to the sessions' colocation group (its rows are copied to
-- their sessions' shards inside this transaction: stop ingestion first, as for migration 0006).

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        -- Citus's catalog exists only where the extension does: planned only here.
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'event_ids'::regclass) THEN
            -- Back to a local table, to be distributed again by its new key below.
            PERFORM undistribute_table('event_ids');
        END IF;
    END IF;
END
$$;

ALTER TABLE event_ids DROP CONSTRAINT event_ids_pkey;
ALTER TABLE event_ids ADD CONSTRAINT event_ids_pkey PRIMARY KEY (session_id, event_id);

SELECT adtally_distribute('event_ids', 'session_id', 'sessions');

-- (The check is added on its own, under its name: Citus refuses a column added with an unnamed
-- constraint.)
ALTER TABLE sessions
    ADD COLUMN click_hour timestamptz,
    ADD COLUMN clicks_in_hour integer NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD CONSTRAINT sessions_clicks_in_hour_check CHECK (clicks_in_hour >= 0);
