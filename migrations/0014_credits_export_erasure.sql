-- AdTally schema, version 14 (API 1.4): credits for invalid traffic found after the fact, the events
-- behind a count, and erasure of a session.
--
-- 1. Credits. An adjustment is a record of its own, kept forever (adjustments), with its per-ad
--    totals beside the rollups (adjustment_ads, also forever). Each credited event has one mark
--    (credit_marks), keyed like the event (session, event id): "an event is credited at most once"
--    is the mark's primary key. A mark goes with the retention like the raw row it marks; the
--    totals stay. On Citus the marks live on their session's shard (colocated with sessions); the
--    two small tables are reference tables (an adjustment is made through the coordinator).
-- 2. Erasure. A session's raw events stay as anonymous rows: same ad, type, times, outcome and
--    reason; no event id (a fresh random one replaces it, which names nothing and serves only as
--    the key of the row's credit mark), no snapshot id, no position, and in place of the session id
--    a key no client can send ('#' is not an identifier character) chosen by
--    adtally_anonymous_session so that on Citus the row stays on the erased session's shard.
--    events gets an index on session_id (every partition: one session's rows found without a
--    scan), and snapshot_owners one on session_id (its snapshot ids stay owned, by nobody).
--    erased_sessions keeps the SHA-256 digest of each erased id and when it was erased; on Citus a
--    reference table, which every node reads locally on the event path.
--
-- Locks and duration on a large database: CREATE INDEX on events builds the session index of every
-- partition in this transaction (SHARE lock on events: ingestion waits; reports and reads go on):
-- measured at 20.5 s for 20 million raw rows on a 2-core development machine (scripts/bench-erasure).
-- The other tables are new or small.

-- On Citus this transaction distributes tables and then a function, which Citus refuses after a
-- parallel operation on a distributed table in the same transaction: one connection per node.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

CREATE TABLE adjustments (
    adjustment_id        text COLLATE "C" PRIMARY KEY,
    reason               text NOT NULL CHECK (reason IN ('sivt', 'advertiser_dispute', 'operator_error')),
    note                 text,
    -- The request as it was read (canonical form): the same id with another body is a conflict.
    request              text NOT NULL,
    created_at           timestamptz NOT NULL,
    events_from          timestamptz NOT NULL,
    events_to            timestamptz NOT NULL,
    credited_impressions bigint NOT NULL,
    credited_clicks      bigint NOT NULL,
    CHECK (events_from < events_to)
);
CREATE INDEX adjustments_created_idx ON adjustments (created_at, adjustment_id);

CREATE TABLE adjustment_ads (
    adjustment_id        text COLLATE "C" NOT NULL REFERENCES adjustments (adjustment_id),
    ad_id                text COLLATE "C" NOT NULL,
    advertiser_id        text COLLATE "C" NOT NULL,
    credited_impressions bigint NOT NULL,
    credited_clicks      bigint NOT NULL,
    PRIMARY KEY (adjustment_id, ad_id)
);

CREATE TABLE credit_marks (
    session_id    text COLLATE "C" NOT NULL,
    event_id      uuid NOT NULL,
    adjustment_id text COLLATE "C" NOT NULL,
    ad_id         text COLLATE "C" NOT NULL,
    type          text NOT NULL,
    received_at   timestamptz NOT NULL,
    PRIMARY KEY (session_id, event_id)
);
-- Retention drops the marks of dropped raw rows by this.
CREATE INDEX credit_marks_received_idx ON credit_marks (received_at);

CREATE TABLE erased_sessions (
    digest     bytea PRIMARY KEY CHECK (length(digest) = 32),
    erased_at  timestamptz NOT NULL
);

-- IF NOT EXISTS: an operator may have built it ahead, partition by partition (docs/OPERATIONS.md).
-- A hash index: erasure only ever asks for one session id (equality), and every stored event adds an
-- entry, so the cheaper insert wins. Measured with scripts/bench-ingest against no index at all:
-- a btree on session_id cost 6% of single events/s and 7% of batched ones, the hash index about 0%
-- and 3%.
-- Corrected after its release (the first text made a btree); migration 0015 makes a btree left by
-- it a hash index, so a database that applied the first text is accepted.
-- adtally: earlier checksum 53186adeff99e1ebabd4d053f5c6e7de27aa95221bcd7797a413181357b5a610
CREATE INDEX IF NOT EXISTS events_session_idx ON events USING hash (session_id);
CREATE INDEX snapshot_owners_session_idx ON snapshot_owners (session_id);

-- The session key of an erased session's anonymous rows. On plain PostgreSQL one constant; on
-- Citus the first of '#erased-0', '#erased-1', ... that Citus places in the erased session's shard
-- (a few dozen tries at most for 32 shards), so that the anonymous rows and their marks stay where
-- the session's rows were. '#' is not an identifier character: no client can name these rows.
CREATE FUNCTION adtally_anonymous_session(session_id text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    shard bigint;
    n     integer := 0;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN '#erased';
    END IF;
    EXECUTE 'SELECT get_shard_id_for_distribution_column(''sessions'', $1)' INTO shard USING session_id;
    LOOP
        DECLARE
            candidate text := '#erased-' || n;
            candidate_shard bigint;
        BEGIN
            EXECUTE 'SELECT get_shard_id_for_distribution_column(''sessions'', $1)' INTO candidate_shard USING candidate;
            IF candidate_shard = shard THEN
                RETURN candidate;
            END IF;
        END;
        n := n + 1;
        IF n > 100000 THEN
            RAISE EXCEPTION 'no anonymous key found for the shard of session %', session_id;
        END IF;
    END LOOP;
END
$$;

-- Erases one session: deletes its snapshots (and their ads), counting state, click state and
-- ledger rows; re-keys its raw events and their credit marks as anonymous rows (above); keeps its
-- snapshot ids owned by nobody. Returns the raw events and snapshots it erased. One session's
-- rows only, found by index; on Citus a function delegated to the session's shard. The caller has
-- recorded the digest (erased_sessions) and waited until no event transaction that could have
-- missed it is still open (ErasureStore).
CREATE FUNCTION adtally_erase_session(session_id text, OUT events bigint, OUT snapshots bigint)
LANGUAGE plpgsql AS $$
DECLARE
    anonymous  text := adtally_anonymous_session(session_id);
    old_ids    uuid[];
    new_ids    uuid[];
    types      text[];
    ad_ids     text[];
    statuses   text[];
    reasons    text[];
    occurred   timestamptz[];
    received   timestamptz[];
    fractions  float8[];
    visible    int[];
BEGIN
    PERFORM adtally_key_access_only();
    -- The session's row first: a feed registration in flight holds it locked and checks the
    -- suppression only after it took that lock (FeedSnapshotStore), so once this delete has waited
    -- for it, its snapshots are committed and every statement below sees them.
    DELETE FROM sessions s WHERE s.session_id = adtally_erase_session.session_id;
    DELETE FROM snapshot_ads sa WHERE sa.session_id = adtally_erase_session.session_id;
    WITH gone AS (DELETE FROM snapshots s WHERE s.session_id = adtally_erase_session.session_id RETURNING 1)
    SELECT count(*) INTO snapshots FROM gone;
    DELETE FROM session_ads sa WHERE sa.session_id = adtally_erase_session.session_id;
    DELETE FROM event_ids i WHERE i.session_id = adtally_erase_session.session_id;

    WITH gone AS (DELETE FROM events e WHERE e.session_id = adtally_erase_session.session_id
                  RETURNING e.event_id, e.type, e.ad_id, e.status, e.reason, e.occurred_at, e.received_at,
                            e.visible_fraction, e.visible_ms)
    SELECT coalesce(array_agg(g.event_id ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(gen_random_uuid() ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.type ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.ad_id ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.status ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.reason ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.occurred_at ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.received_at ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.visible_fraction ORDER BY g.received_at, g.event_id), '{}'),
           coalesce(array_agg(g.visible_ms ORDER BY g.received_at, g.event_id), '{}')
    INTO old_ids, new_ids, types, ad_ids, statuses, reasons, occurred, received, fractions, visible
    FROM gone g;
    events := coalesce(array_length(old_ids, 1), 0);
    IF events > 0 THEN
        INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                            snapshot_id, position, visible_fraction, visible_ms)
        SELECT anonymous, u.n, u.t, u.a, u.s, u.r, u.o, u.rc, NULL, NULL, u.f, u.v
        FROM unnest(new_ids, types, ad_ids, statuses, reasons, occurred, received, fractions, visible)
             AS u(n, t, a, s, r, o, rc, f, v);
        -- Marks follow their events to the anonymous keys (a mark whose raw row is gone already
        -- goes: nothing can read it any more).
        WITH moved AS (DELETE FROM credit_marks m WHERE m.session_id = adtally_erase_session.session_id
                       RETURNING m.event_id, m.adjustment_id, m.ad_id, m.type, m.received_at)
        INSERT INTO credit_marks (session_id, event_id, adjustment_id, ad_id, type, received_at)
        SELECT anonymous, u.n, m.adjustment_id, m.ad_id, m.type, m.received_at
        FROM moved m JOIN unnest(old_ids, new_ids) AS u(o, n) ON u.o = m.event_id;
    END IF;
    DELETE FROM credit_marks m WHERE m.session_id = adtally_erase_session.session_id;
    UPDATE snapshot_owners o SET session_id = anonymous WHERE o.session_id = adtally_erase_session.session_id;
END
$$;

-- Returns once final_before has passed `instant` (and what it read): every event transaction that
-- stamped its events before `instant` has ended. An erasure waits for this after its suppression
-- committed, so that no event transaction that could have missed the suppression is still open
-- when the session's rows are erased. Bounded by the caller's statement_timeout.
CREATE FUNCTION adtally_await_final_before(instant timestamptz) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    final timestamptz;
BEGIN
    LOOP
        final := adtally_final_before();
        EXIT WHEN final > instant;
        PERFORM pg_sleep(0.002);
    END LOOP;
    RETURN final;
END
$$;

SELECT adtally_distribute('adjustments', NULL);
SELECT adtally_distribute('adjustment_ads', NULL);
SELECT adtally_distribute('erased_sessions', NULL);
SELECT adtally_distribute('credit_marks', 'session_id', 'sessions');

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE $sql$SELECT create_distributed_function('adtally_erase_session(text)'::regprocedure,
            'session_id', colocate_with := 'sessions')$sql$;
    END IF;
END
$$;
