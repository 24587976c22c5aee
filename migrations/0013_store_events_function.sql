-- AdTally schema, version 13: one session's events and ledger rows stored by one function call,
-- which Citus runs on the session's shard (issue 32).
--
-- On Citus every statement of an event transaction is planned on the node AdTally talks to, then
-- sent to the shard's node as text and parsed and planned there again. The two inserts of a
-- batch (its audit rows in `events`, its ids in the ledger) were multi-row VALUES lists of 12 and
-- 7 columns: perf on a cluster under batches of 50 showed Citus's planning, deparsing and
-- re-parsing of those lists as the largest single cost on both nodes (docs/SCALING.md).
-- adtally_store_events takes one session's rows as arrays, the form plain PostgreSQL's inserts
-- have always used, and inserts them where it runs. On Citus it is a distributed function
-- colocated with `sessions`, its first argument the distribution key, delegated inside the
-- transaction (force_delegation): the node AdTally talks to sends one call to the session's shard,
-- whose node runs both inserts locally. The rows go in in the order given (AdTally's key order:
-- the session, then the event id), so that two transactions never wait on each other's ids in
-- opposite orders.
--
-- Plain PostgreSQL gets the function too (one schema for both engines) but AdTally keeps inserting
-- there with two statements of array parameters (EventStore), which group commit fills with many
-- sessions' events, where the function takes one session's.
--
-- Locks and duration: none worth saying (a function created, and on Citus distributed).
CREATE FUNCTION adtally_store_events(session_id text, event_ids uuid[], types text[], ad_ids text[],
                                     statuses text[], reasons text[], occurred_at timestamptz[],
                                     received_at timestamptz, snapshot_ids text[], positions int[],
                                     visible_fractions float8[], visible_ms int[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                        snapshot_id, position, visible_fraction, visible_ms)
    SELECT adtally_store_events.session_id, u.e, u.t, u.a, u.st, u.r, u.o, adtally_store_events.received_at,
           u.sn, u.p, u.f, u.ms
    FROM unnest(event_ids, types, ad_ids, statuses, reasons, occurred_at, snapshot_ids, positions,
                visible_fractions, visible_ms) WITH ORDINALITY AS u(e, t, a, st, r, o, sn, p, f, ms, n)
    ORDER BY u.n;
    INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
    SELECT u.e, adtally_store_events.session_id, u.t, u.a, adtally_store_events.received_at, u.st, u.r
    FROM unnest(event_ids, types, ad_ids, statuses, reasons) WITH ORDINALITY AS u(e, t, a, st, r, n)
    ORDER BY u.n;
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE $sql$SELECT create_distributed_function(
            'adtally_store_events(text, uuid[], text[], text[], text[], text[], timestamptz[], timestamptz, text[], int[], float8[], int[])'::regprocedure,
            'session_id', colocate_with := 'sessions', force_delegation := true)$sql$;
    END IF;
END
$$;
