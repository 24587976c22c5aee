-- AdTally schema, version 10: rollups for every time zone, folded continuously (API 1.3).
--
-- Every zone's local hours and days start on a UTC quarter hour (every offset in force today is a
-- whole number of quarter hours), so counts per ad and quarter hour answer any zone's buckets
-- exactly; counts per ad and 24-hour day, one set per "phase" (the UTC time of day at which a
-- zone's local days start: 00:00 for UTC, 18:30 for Asia/Kolkata, 04:00 and 05:00 for
-- America/New_York in summer and winter), make a month of local days a few rows per ad. Both carry
-- every count a report shows, the four reasons of 1.3 included. The fold no longer waits for an hour
-- to end: it folds every event received before final_before, into the quarter it falls in (adding
-- to that quarter's row while the quarter is not over), so a report reads at most the raw rows
-- received since the last fold (docs/ARCHITECTURE.md, "History").
--
-- The hourly rollups stay where they are, and so do their counts: no row is copied or rewritten.
-- They answer the history folded before this migration (before quarters_from); maintenance then
-- re-folds that history from the raw rows it still has, an hour per short transaction, newest
-- first, into quarter-hour rows (checked equal to the hourly row it replaces, which it deletes in
-- the same transaction), so that every zone is exact there too. Hours whose raw rows were already
-- dropped stay hourly: exact for whole-hour bounds and zones, and a report that would split one
-- is refused (docs/REPORTS.md).
--
-- Locks and duration on a large database: the new tables are created empty; lifecycle_state (one
-- row) is altered; ad_hourly_counts and ad_daily_counts are not touched. The migration takes
-- milliseconds whatever the size (0 s per million rows). Re-folding the history afterwards runs in
-- maintenance's budget, beside ingestion, at the catch-up rate of the fold (docs/REPORTS.md:
-- about 8 s per million events on the development machine), taking no lock that ingestion or a
-- report waits for. Processes of the previous version must be stopped first: their maintenance
-- would fold hours into the old tables, which the new reports no longer read after
-- quarters_from (its statements fail on the renamed columns instead).

CREATE TABLE ad_quarter_counts (
    ad_id                       text COLLATE "C" NOT NULL,
    quarter                     timestamptz NOT NULL,
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
    no_impression               bigint NOT NULL,
    click_limit_exceeded        bigint NOT NULL,
    bot_agent                   bigint NOT NULL,
    blocked_address             bigint NOT NULL,
    impression_already_counted  bigint NOT NULL,
    click_within_window         bigint NOT NULL,
    simultaneous_click          bigint NOT NULL,
    -- The counts ride in the key's index: an ad's quarters are an index-only range scan (0007).
    CONSTRAINT ad_quarter_counts_pkey PRIMARY KEY (ad_id, quarter) INCLUDE (impressions, clicks,
        duplicate_impressions, rejected_impressions, duplicate_clicks, rejected_clicks, ad_not_in_feed,
        stale_snapshot, position_mismatch, not_viewable, ad_not_served, no_impression, click_limit_exceeded,
        bot_agent, blocked_address, impression_already_counted, click_within_window, simultaneous_click),
    CHECK (extract(epoch FROM quarter)::bigint % 900 = 0)
);
-- Listings of every ad, the daily folds, and retention's sweep of unregistered ads read by time.
CREATE INDEX ad_quarter_counts_quarter_idx ON ad_quarter_counts (quarter);

-- One row per ad, phase and 24-hour day starting at `day` (day's time of day in UTC is the
-- phase, in minutes): folded from 96 quarter rows once the day is folded.
CREATE TABLE ad_day_counts (
    ad_id                       text COLLATE "C" NOT NULL,
    phase                       smallint NOT NULL,
    day                         timestamptz NOT NULL,
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
    no_impression               bigint NOT NULL,
    click_limit_exceeded        bigint NOT NULL,
    bot_agent                   bigint NOT NULL,
    blocked_address             bigint NOT NULL,
    impression_already_counted  bigint NOT NULL,
    click_within_window         bigint NOT NULL,
    simultaneous_click          bigint NOT NULL,
    CONSTRAINT ad_day_counts_pkey PRIMARY KEY (ad_id, phase, day) INCLUDE (impressions, clicks,
        duplicate_impressions, rejected_impressions, duplicate_clicks, rejected_clicks, ad_not_in_feed,
        stale_snapshot, position_mismatch, not_viewable, ad_not_served, no_impression, click_limit_exceeded,
        bot_agent, blocked_address, impression_already_counted, click_within_window, simultaneous_click),
    CHECK (phase >= 0 AND phase < 1440 AND phase % 15 = 0),
    CHECK ((extract(epoch FROM day)::bigint - phase * 60) % 86400 = 0)
);
CREATE INDEX ad_day_counts_day_idx ON ad_day_counts (day);

-- Rows are inserted in bulk and the latest quarter's rows updated by every fold: autovacuum
-- visits every few thousand changes, so that the visibility map stays current for index-only
-- scans and the updated rows' old versions go soon.
ALTER TABLE ad_quarter_counts SET (autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0,
                                   autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_scale_factor = 0);
ALTER TABLE ad_day_counts SET (autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0);

-- The phases kept as daily rows: UTC's always; a zone's are added when reports ask for it
-- (maintenance registers them). Daily rows of a phase cover [days_from, days_to).
CREATE TABLE rollup_day_phases (
    phase      smallint PRIMARY KEY CHECK (phase >= 0 AND phase < 1440 AND phase % 15 = 0),
    days_from  timestamptz NOT NULL,
    days_to    timestamptz NOT NULL,
    added_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (days_from <= days_to)
);

-- final_before as published for standbys, in a row of its own: every process publishes it every
-- few seconds, and must never wait behind a fold, which holds lifecycle_state's row.
CREATE TABLE published_final_before (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    final_before  timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO published_final_before (final_before) SELECT final_before FROM lifecycle_state;

-- lifecycle_state: folded_to is any instant now (every event received before it is in the
-- rollups); the quarter rows cover [quarters_from, folded_to), the hourly rows of before this
-- migration what lies before quarters_from, and ad_daily_counts the whole UTC days before
-- legacy_days_to that also end by quarters_from. refining: maintenance still re-folds hourly
-- history whose raw rows are kept.
LOCK TABLE lifecycle_state IN ACCESS EXCLUSIVE MODE;
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'lifecycle_state'::regclass AND contype = 'c' AND conname <> 'lifecycle_state_singleton_check' LOOP
        EXECUTE format('ALTER TABLE lifecycle_state DROP CONSTRAINT %I', c);
    END LOOP;
END
$$;
ALTER TABLE lifecycle_state RENAME COLUMN rolled_up_to TO folded_to;
ALTER TABLE lifecycle_state RENAME COLUMN days_rolled_up_to TO legacy_days_to;
ALTER TABLE lifecycle_state DROP COLUMN final_before;
ALTER TABLE lifecycle_state ADD COLUMN quarters_from timestamptz;
ALTER TABLE lifecycle_state ADD COLUMN refining boolean NOT NULL DEFAULT true;
-- Retention has deleted the rollup rows of ads no snapshot registered before this instant (their
-- raw rows are gone: API 1.3, section 7).
ALTER TABLE lifecycle_state ADD COLUMN unregistered_swept_to timestamptz NOT NULL DEFAULT '-infinity';
UPDATE lifecycle_state SET quarters_from = folded_to;
ALTER TABLE lifecycle_state ALTER COLUMN quarters_from SET NOT NULL;
ALTER TABLE lifecycle_state ADD CONSTRAINT lifecycle_state_quarters_check CHECK (quarters_from <= folded_to);

-- UTC's days, from the first whole UTC day of the quarter rows.
INSERT INTO rollup_day_phases (phase, days_from, days_to)
SELECT 0, d, d
FROM (SELECT date_trunc('day', folded_to AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
             + CASE WHEN date_trunc('day', folded_to AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' < folded_to THEN interval '1 day' ELSE interval '0' END AS d
      FROM lifecycle_state) s;

-- Starts the rollups again at `at` (floored to the hour): every rollup row from then on is deleted
-- and maintenance folds the raw rows from there again. For loading history in bulk (a benchmark, a
-- restore of raw rows), and for tests that store events at instants of their choosing. Waits for a
-- fold under way (maintenance's advisory lock), so that none adds to a row it deletes.
CREATE FUNCTION adtally_restart_rollups(at timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h timestamptz := date_trunc('hour', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
BEGIN
    PERFORM pg_advisory_xact_lock(4702976550327372110);
    DELETE FROM ad_quarter_counts WHERE quarter >= h;
    -- The day's end past h, written with the arithmetic on h: Citus refuses a STABLE function
    -- (timestamptz + interval) of a column in a modification of a distributed table.
    DELETE FROM ad_day_counts WHERE day > h - interval '1 day';
    DELETE FROM ad_hourly_counts WHERE hour >= h;
    DELETE FROM ad_daily_counts WHERE day > h - interval '1 day';
    UPDATE lifecycle_state SET folded_to = h, quarters_from = least(quarters_from, h),
                               legacy_days_to = least(legacy_days_to, date_trunc('day', h AT TIME ZONE 'UTC') AT TIME ZONE 'UTC');
    -- Each phase starts again at its last day boundary at or before h (whole days only).
    UPDATE rollup_day_phases SET days_to = b, days_from = least(days_from, b)
    FROM (SELECT p.phase AS ph,
                 to_timestamp(floor((extract(epoch FROM h) - p.phase * 60) / 86400) * 86400 + p.phase * 60) AS b
          FROM rollup_day_phases p) s
    WHERE phase = s.ph;
    UPDATE rollup_day_phases SET days_from = days_to WHERE days_from > days_to;
END
$$;

-- Last: on Citus a function may not be created after a parallel operation on a distributed table
-- in the same transaction ("Citus needs to perform all operations over a single connection per
-- node"), which distributing a table is.
SELECT adtally_distribute('ad_quarter_counts', 'ad_id', 'ad_hourly_counts');
SELECT adtally_distribute('ad_day_counts', 'ad_id', 'ad_hourly_counts');
