-- AdTally schema, version 11: on Citus, AdTally may write through any node (issue 32).
--
-- Citus 11 and later route queries from every node, so an AdTally process may store events through
-- a worker as well as through the coordinator. Two things are then wrong if left as they were:
--
-- 1. final_before. An event transaction takes its watermark lock (adtally_begin_batch) in the
--    pg_locks of the node it entered through, and adtally_final_before() read only its own node's.
--    It now answers the minimum over every node of what that node vouches for: each node reads its
--    own clock, then its own held keys (adtally_node_final_before), so that the argument of
--    docs/ARCHITECTURE.md ("Why a folded hour is exact") holds node by node with that node's clock,
--    and the minimum holds for all of them. A node that does not answer fails the call (a report or
--    a fold then fails; none is answered with a watermark that a node did not vouch for). Only
--    maintenance and reports read it, never an event. On plain PostgreSQL, and on Citus without
--    other nodes, it is what it was.
-- 2. schema_migrations. A process pointed at a worker must see which migrations are applied; the
--    table becomes a reference table (a copy on every node). Migrations still run through the
--    coordinator only (DDL on distributed tables is the coordinator's); a process pointed at a
--    worker applies none and refuses to start while any is pending (MigrationRunner).
--
-- 3. The day a batch marks its sessions active on. lockSessions read it from a subquery
--    (coalesce(fixed day, now()): Citus refuses a non-immutable function inside coalesce in an
--    update), which Citus runs as a subplan of its own and ships to the shard's node as an
--    intermediate result: a second task in every event transaction, and through a worker whose own
--    shard it is, a second connection to that node and so a two-phase commit. adtally_begin_batch
--    now records the batch's day (the UTC date of its received_at) as a transaction-local setting,
--    adtally.batch_day, which the update reads with current_setting: Citus evaluates that on the
--    node the transaction entered through and sends the shard a constant (a router query, one
--    task). The day is now received_at's, the instant the batch's events carry, where it was the
--    transaction's start (now()): the same day but within a statement's duration of midnight.
--
-- lifecycle_state stays a plain table on the coordinator: maintenance (and the final_before it
-- publishes for standbys) runs through the coordinator, and a process pointed at a worker reads
-- reports through the coordinator (ADTALLY_REPORTS_DATABASE_URL; docs/SCALING.md).
--
-- Locks and duration: none worth saying (a function replaced, and schema_migrations, a few rows,
-- copied to every node).

-- What this node vouches for: its clock (shifted by `clock_offset` when given, else as
-- adtally_clock() says), then the earliest watermark key held in its pg_locks. Migration 0005's
-- adtally_final_before, for one node.
CREATE FUNCTION adtally_node_final_before(clock_offset interval) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now_  timestamptz := CASE WHEN clock_offset IS NULL THEN adtally_clock() ELSE clock_timestamp() + clock_offset END;
    held  timestamptz;
BEGIN
    SELECT min('2000-01-01 00:00:00+00'::timestamptz
               + (((l.classid::bigint & 16777215) << 32) | l.objid::bigint) * interval '1 microsecond')
    INTO held
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND (l.classid::bigint >> 24) = 90
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());
    RETURN least(now_, coalesce(held, now_));
END
$$;

-- The minimum over this node and, on Citus, every node of the cluster (run_command_on_all_nodes,
-- which reaches each node over a connection of its own; the test clock's offset, a setting of this
-- session, is handed to each). Called by dynamic SQL: the Citus function exists only where the
-- extension does.
CREATE OR REPLACE FUNCTION adtally_final_before() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    result  timestamptz := adtally_node_final_before(NULL);
    offset_ text := coalesce(nullif(current_setting('adtally.clock_offset', true), ''), '0');
    node    record;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        FOR node IN EXECUTE 'SELECT nodeid, success, result FROM run_command_on_all_nodes($1)'
                    USING format('SELECT adtally_node_final_before(%L::interval)', offset_) LOOP
            IF NOT node.success THEN
                RAISE EXCEPTION 'final_before: node % (pg_dist_node) did not answer: %', node.nodeid, node.result;
            END IF;
            result := least(result, node.result::timestamptz);
        END LOOP;
    END IF;
    RETURN result;
END
$$;

-- Opens a batch as in version 5 (the watermark lock, key access only, the batch's received_at), and
-- records the batch's day (3.).
CREATE OR REPLACE FUNCTION adtally_begin_batch(fixed timestamptz) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz := coalesce(fixed, adtally_clock());
    received timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(adtally_watermark_key(at));
    PERFORM adtally_key_access_only();
    received := coalesce(fixed, adtally_clock());
    PERFORM set_config('adtally.batch_day', to_char(received AT TIME ZONE 'UTC', 'YYYY-MM-DD'), true);
    RETURN received;
END
$$;

SELECT adtally_distribute('schema_migrations', NULL);
