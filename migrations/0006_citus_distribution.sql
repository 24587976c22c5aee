-- AdTally schema, version 6: the schema distributes itself on Citus (docs/SCALING.md).
--
-- On plain PostgreSQL this migration only creates the function below, which then does nothing. On
-- a Citus coordinator (the citus extension is installed in the database), it distributes every
-- table: a session's rows by session_id, all in one colocation group, so that a session's work is
-- one shard's; the two global lookups by their own key; the rollups by ad_id, so that a per-ad
-- report reads one shard; the small ads table as a reference table. What stays on the coordinator
-- as a plain table: lifecycle_state (maintenance state, updated every few seconds by every process;
-- the watermark it goes with lives in the coordinator's pg_locks anyway) and schema_migrations.
--
-- Every call below runs inside the migration's one transaction: create_distributed_table and
-- create_reference_table may (they copy existing rows into the shards in it, so on a large database
-- the tables stay locked against writes until it commits; stop ingestion first).
-- create_distributed_table_concurrently, which would not block writes, refuses to run in a
-- transaction block, so a migration cannot use it.

-- Distributes one table of this schema when the citus extension is installed, else does nothing:
-- `distribution_column` null makes a reference table; `colocate_with` is another distributed
-- table, or 'none' for a colocation group of its own. A table Citus already knows is left as it is,
-- so every migration that creates a table calls this for it, and running it twice is harmless.
-- Identifiers come only from the migrations' own text, and go into the Citus calls as literals.
CREATE FUNCTION adtally_distribute(relation regclass, distribution_column text, colocate_with text DEFAULT 'none')
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = relation) THEN
        RETURN false;
    END IF;
    IF distribution_column IS NULL THEN
        EXECUTE format('SELECT create_reference_table(%L::regclass)', relation::text);
    ELSE
        EXECUTE format('SELECT create_distributed_table(%L::regclass, %L, colocate_with => %L)',
                       relation::text, distribution_column, colocate_with);
    END IF;
    RETURN true;
END
$$;

-- Order matters: a colocation group's first table, then the tables colocated with it, and
-- snapshots before snapshot_ads (its foreign key, which includes session_id, needs them colocated).
-- events is partitioned: distributing it distributes every partition, and a partition attached
-- later (adtally_create_event_partition) is distributed by Citus as it is attached.
SELECT adtally_distribute('ads', NULL);
SELECT adtally_distribute('sessions', 'session_id', 'none');
SELECT adtally_distribute('snapshots', 'session_id', 'sessions');
SELECT adtally_distribute('snapshot_ads', 'session_id', 'sessions');
SELECT adtally_distribute('session_ads', 'session_id', 'sessions');
SELECT adtally_distribute('events', 'session_id', 'sessions');
SELECT adtally_distribute('event_ids', 'event_id', 'none');
SELECT adtally_distribute('snapshot_owners', 'snapshot_id', 'none');
SELECT adtally_distribute('ad_hourly_counts', 'ad_id', 'none');
SELECT adtally_distribute('ad_daily_counts', 'ad_id', 'ad_hourly_counts');

-- Citus lets only one multi-shard write at a time run on a shard unless the writers turn off
-- citus.enable_deadlock_prevention, and an event transaction's writes are multi-shard whenever its
-- batch has more than one session: with it on, every batch would wait for every other batch's
-- transaction to end. AdTally's transactions lock rows in key order, and a deadlock that the
-- parallel shards make anyway is found by Citus's distributed deadlock detection and run again
-- (EventStore). On plain PostgreSQL the setting is a name nobody reads. Otherwise as in version 5.
CREATE OR REPLACE FUNCTION adtally_key_access_only() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
            set_config('enable_seqscan', 'off', true), set_config('citus.enable_deadlock_prevention', 'off', true);
END
$$;
