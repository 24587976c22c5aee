-- AdTally schema, version 17: steady reports over the current hour of a database made today.
--
-- 1. Statistics of the one-row tables. lifecycle_state, published_final_before and
--    rollup_day_phases (a few rows) were never analyzed: PostgreSQL then guesses their size from
--    their pages (690 and 1,810 rows for the first two), so the statement that reads the rollups'
--    reach before a listing was estimated at a cost of about 134,000, above jit_above_cost, and
--    compiled with LLVM on every call: 12 ms of a listing that otherwise takes a few (issue 55).
--    Analyzed once, they are estimated as what they are; autovacuum keeps them so (their row count
--    never changes). The reads that open a report also run with JIT off now (LifecycleState.read).
-- 2. Today's partition from the first day. Migration 0005 made events_legacy cover every instant
--    up to the end of the day it ran, and daily partitions from the next day: on a database made
--    today, today's events go to events_legacy, whose indexes are not the partitions' covering
--    ones. On such a database (events_legacy still empty, its bound still ahead), events_legacy now
--    ends where today begins, and today has its own partition. A database with events in
--    events_legacy, or made on an earlier day, is left as it is. On Citus, where the partitions are
--    distributed, nothing is moved (a distributed partition is not re-bounded in a migration).
--
-- Locks and duration: on a database made today, events is locked ACCESS EXCLUSIVE for an instant
-- (an empty partition detached and attached again); elsewhere no lock. ANALYZE of three tiny tables.

ANALYZE lifecycle_state, published_final_before, rollup_day_phases;

DO $$
DECLARE
    today_start timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    legacy_upper timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SELECT p.upper INTO legacy_upper FROM adtally_event_partitions() p WHERE p.name = 'events_legacy';
    IF legacy_upper IS NULL OR legacy_upper <= today_start OR EXISTS (SELECT 1 FROM events_legacy) THEN
        RETURN;
    END IF;
    ALTER TABLE events DETACH PARTITION events_legacy;
    EXECUTE format('ALTER TABLE events ATTACH PARTITION events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', today_start);
    PERFORM adtally_create_event_partition((now() AT TIME ZONE 'UTC')::date);
END
$$;
