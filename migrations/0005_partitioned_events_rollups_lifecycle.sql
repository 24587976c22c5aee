-- AdTally schema, version 5: history that scales. Raw events range-partitioned by received_at (one
-- partition a UTC day, dropped whole when they age out), exact hourly per-ad rollups behind a
-- watermark, and what retention and idle-session forgetting need.
--
-- Locks and duration on a large database: events is locked ACCESS EXCLUSIVE for the whole
-- migration, which reads it once sequentially (PostgreSQL checks that every row of the existing
-- table fits the partition it becomes, and the rollups start from its oldest event); no row is
-- copied or rewritten. event_ids gets an index on received_at (one pass over the ledger). Ingestion
-- and feed registration wait until it commits: stop the processes of the previous version first.

LOCK TABLE events, event_ids, sessions IN ACCESS EXCLUSIVE MODE;

-- 1. Partitioned events. The existing table becomes the first partition as it is, covering every
--    instant up to the end of today (UTC); daily partitions follow from tomorrow on.
ALTER TABLE events RENAME TO events_legacy;
ALTER INDEX events_ad_received_idx RENAME TO events_legacy_ad_received_idx;
ALTER INDEX events_received_idx RENAME TO events_legacy_received_idx;

CREATE TABLE events (LIKE events_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (received_at);
-- Per-ad reports over a time range lead with the filtered columns; listings over a range use the
-- partitions' own BRIN index. Made on the parent, so every partition gets them when it is attached
-- (the legacy table's equal indexes are attached as they are).
CREATE INDEX events_ad_received_idx ON events (ad_id, received_at) INCLUDE (type, status, reason);
CREATE INDEX events_received_idx ON events USING brin (received_at);

DO $$
DECLARE
    end_of_today timestamptz := (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC';
BEGIN
    EXECUTE format('ALTER TABLE events ATTACH PARTITION events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', end_of_today);
END
$$;

-- One day's partition: made as a table and attached, which locks events only SHARE UPDATE
-- EXCLUSIVE (inserts and reports go on), where CREATE TABLE ... PARTITION OF would lock it
-- ACCESS EXCLUSIVE. Returns whether it made one (false when the day is covered already). Its
-- name is derived from the date; the function is the one definition maintenance and start-up use.
CREATE FUNCTION adtally_create_event_partition(day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    name  text := 'events_p' || to_char(day, 'YYYYMMDD');
    lower timestamptz := (day::timestamp) AT TIME ZONE 'UTC';
    upper timestamptz := ((day + 1)::timestamp) AT TIME ZONE 'UTC';
BEGIN
    IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE c.relname = name AND n.nspname = current_schema()) THEN
        RETURN false;
    END IF;
    -- A day that an existing partition covers (the legacy one) needs none.
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'events'::regclass
                 AND c.relname = 'events_legacy'
                 AND upper <= (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz) THEN
        RETURN false;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)', name);
        EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lower, upper);
    EXCEPTION WHEN duplicate_table OR invalid_object_definition THEN
        -- Another process made it meanwhile (or a partition covers the day): nothing to do.
        RETURN false;
    END;
    RETURN true;
END
$$;

-- The partitions of events with the end of the range each covers (null: no upper bound) and
-- whether a concurrent detach of it was left unfinished, oldest first.
CREATE FUNCTION adtally_event_partitions() RETURNS TABLE (name text, upper timestamptz, detach_pending boolean)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz,
           i.inhdetachpending
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events'::regclass
    ORDER BY 2 NULLS LAST
$$;

-- A week ahead from tomorrow, so that ingestion needs nothing else to start.
SELECT adtally_create_event_partition(d::date)
FROM generate_series((now() AT TIME ZONE 'UTC')::date + 1, (now() AT TIME ZONE 'UTC')::date + 8, interval '1 day') AS d;

-- 2. The watermark. Every transaction that stores events first takes a shared transaction-level
--    advisory lock whose key encodes the instant it will stamp its events with (received_at, the
--    database's clock, read after the lock is held), and holds it until it ends. final_before, read
--    from pg_locks, is the earliest such instant still held (or the clock, when none is): every
--    event received before it is committed, and no transaction can still store one. The key: 0x5A
--    in the top byte, microseconds since 2000-01-01 UTC below (good for two thousand years).
CREATE FUNCTION adtally_watermark_key(instant timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (90::bigint << 56) + (extract(epoch FROM instant - '2000-01-01 00:00:00+00'::timestamptz) * 1000000)::bigint
$$;

-- The database's clock, which stamps received_at and bounds final_before: one clock for every
-- process on every host. A test shifts it with the setting adtally.clock_offset (an interval), to
-- play hours of traffic in seconds; unset, as in production, it is clock_timestamp().
CREATE FUNCTION adtally_clock() RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    SELECT clock_timestamp() + coalesce(nullif(current_setting('adtally.clock_offset', true), '')::interval, interval '0')
$$;

-- Every statement of an event transaction reads its rows by key: a nested loop over its input
-- (sorted, where it locks) into a primary-key index. This keeps it so for the transaction, whatever
-- the statistics say: a hash or merge join would lock rows in the order of a scan of the table
-- instead of the input's key order, and a plan made while a table was empty (a new database, the
-- first minute before autovacuum analyses it) would scan the whole table for every batch until
-- the plan is made again (measured: 19.5 ms per ledger lookup at 50k rows, instead of a few
-- microseconds per id).
CREATE FUNCTION adtally_key_access_only() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
            set_config('enable_seqscan', 'off', true);
END
$$;

-- Opens a batch: takes the watermark lock, sets the transaction to key access only, and returns
-- the batch's received_at. `fixed` is for tests only (a known instant); production passes null and
-- gets the database's clock, read after the lock is held, so that received_at is never earlier
-- than the key a reader sees.
CREATE FUNCTION adtally_begin_batch(fixed timestamptz) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz := coalesce(fixed, adtally_clock());
BEGIN
    PERFORM pg_advisory_xact_lock_shared(adtally_watermark_key(at));
    PERFORM adtally_key_access_only();
    RETURN coalesce(fixed, adtally_clock());
END
$$;

-- The clock first, then the held keys: a batch that takes its lock after pg_locks was read stamps
-- its events later than the clock read before it.
CREATE FUNCTION adtally_final_before() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now_  timestamptz := adtally_clock();
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

-- 3. Exact hourly per-ad counts, forever: every count a report answers, per hour of received_at.
--    An hour is folded once, in the transaction that moves the watermark past it, and only when
--    final_before has passed its end: the hour's raw rows are all committed and no more can come.
CREATE TABLE ad_hourly_counts (
    ad_id                       text COLLATE "C" NOT NULL,
    hour                        timestamptz NOT NULL,
    impressions                 bigint NOT NULL,
    clicks                      bigint NOT NULL,
    duplicate_impressions       bigint NOT NULL,
    rejected_impressions        bigint NOT NULL,
    duplicate_clicks            bigint NOT NULL,
    rejected_clicks             bigint NOT NULL,
    ad_not_in_feed              bigint NOT NULL,
    stale_snapshot              bigint NOT NULL,
    position_mismatch           bigint NOT NULL,
    not_viewable                bigint NOT NULL,
    ad_not_served               bigint NOT NULL,
    impression_already_counted  bigint NOT NULL,
    click_within_window         bigint NOT NULL,
    simultaneous_click          bigint NOT NULL,
    PRIMARY KEY (ad_id, hour)
);

-- A listing of every ad over a range reads the rows of its hours or days.
CREATE INDEX ad_hourly_counts_hour_idx ON ad_hourly_counts (hour);

-- The same per UTC day, folded from the hourly rows once a day is complete: what day listings read.
CREATE TABLE ad_daily_counts (LIKE ad_hourly_counts INCLUDING ALL);
ALTER TABLE ad_daily_counts RENAME COLUMN hour TO day;
ALTER INDEX ad_daily_counts_hour_idx RENAME TO ad_daily_counts_day_idx;

-- What maintenance has done: the rollups cover every hour before rolled_up_to (daily ones every day
-- before days_rolled_up_to), and the last final_before it read (which a standby, which has no view
-- of the primary's locks, reports).
CREATE TABLE lifecycle_state (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    rolled_up_to       timestamptz NOT NULL,
    days_rolled_up_to  timestamptz NOT NULL,
    final_before       timestamptz NOT NULL,
    -- The oldest raw event kept (null when none), found again after a partition is dropped.
    oldest_received_at timestamptz,
    -- Which process runs maintenance now, until when (a lease, so that the others skip the run;
    -- one that stopped mid-run lets it expire).
    maintenance_owner  text,
    maintenance_until  timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (date_trunc('hour', rolled_up_to AT TIME ZONE 'UTC') = rolled_up_to AT TIME ZONE 'UTC'),
    CHECK (date_trunc('day', days_rolled_up_to AT TIME ZONE 'UTC') = days_rolled_up_to AT TIME ZONE 'UTC'),
    CHECK (days_rolled_up_to <= rolled_up_to)
);
-- The rollups start at the oldest event's hour, so that existing history is folded by maintenance
-- (reports read raw rows for the hours it has not reached yet).
INSERT INTO lifecycle_state (rolled_up_to, days_rolled_up_to, final_before, oldest_received_at)
SELECT date_trunc('hour', coalesce(o.oldest, now()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
       date_trunc('day', coalesce(o.oldest, now()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
       coalesce(o.oldest, now()), o.oldest
FROM (SELECT min(received_at) AS oldest FROM events) o;

-- 4. Retention and forgetting. The ledger is pruned by received_at once a replay could no longer
--    pass rule 1; a session is forgotten when neither a snapshot nor an event of it came for the TTL,
--    which last_active_on records to the day (written at most once a day per session).
CREATE INDEX event_ids_received_idx ON event_ids (received_at);

ALTER TABLE sessions ADD COLUMN last_active_on date NOT NULL DEFAULT ((now() AT TIME ZONE 'UTC')::date);
CREATE INDEX sessions_last_active_idx ON sessions (last_active_on);
