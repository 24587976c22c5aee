-- The rollups' counts ride in their primary keys' indexes, so that a report reads an ad's hours
-- and days from a few adjacent index pages (an index-only scan) instead of one heap page per row:
-- rows are written an hour (a day) at a time for every ad, so an ad's rows are scattered over the
-- table. Measured by scripts/bench-reports: one advertiser's 30-day daily listing read 12,300
-- buffers before and 370 after.
--
-- The tables were created by the migration before this one in the same release and hold at most a
-- few days of rows when this runs, so the keys are rebuilt in place (the brief lock of a small
-- table) rather than built concurrently and swapped.
-- (Numbered 0007: 0006 is the distribution of the tables on Citus, which runs first where Citus is.)
--
-- Corrected after its release: the key was dropped and added in one ALTER TABLE, which Citus
-- refuses on a distributed table ("cannot execute ADD CONSTRAINT command with other subcommands");
-- two statements make the same schema, so a database that applied the first text is accepted.
-- adtally: earlier checksum 76e3d6f813133d3895a6264fde8b4ab960f17946a950244e6397b77d78da6118
ALTER TABLE ad_hourly_counts DROP CONSTRAINT ad_hourly_counts_pkey;
ALTER TABLE ad_hourly_counts ADD CONSTRAINT ad_hourly_counts_pkey PRIMARY KEY (ad_id, hour) INCLUDE (impressions, clicks,
        duplicate_impressions, rejected_impressions, duplicate_clicks, rejected_clicks, ad_not_in_feed,
        stale_snapshot, position_mismatch, not_viewable, ad_not_served, impression_already_counted,
        click_within_window, simultaneous_click);
ALTER TABLE ad_daily_counts DROP CONSTRAINT ad_daily_counts_pkey;
ALTER TABLE ad_daily_counts ADD CONSTRAINT ad_daily_counts_pkey PRIMARY KEY (ad_id, day) INCLUDE (impressions, clicks,
        duplicate_impressions, rejected_impressions, duplicate_clicks, rejected_clicks, ad_not_in_feed,
        stale_snapshot, position_mismatch, not_viewable, ad_not_served, impression_already_counted,
        click_within_window, simultaneous_click);

-- Index-only scans need the visibility map, which a vacuum sets. Rows are only ever inserted here,
-- so by default autovacuum would wait for a fifth of the table to be new (weeks of days on a big
-- table) and the latest, most read rows would be fetched from the heap; instead every thousand
-- new rows (such a vacuum reads only the pages not yet marked all-visible).
ALTER TABLE ad_hourly_counts SET (autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0);
ALTER TABLE ad_daily_counts SET (autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0);
