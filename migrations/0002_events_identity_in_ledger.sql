-- AdTally schema, version 2: an event's identity lives in the event_ids ledger only.
--
-- The events primary key (session_id, event_id) repeated what the ledger's primary key already
-- guarantees (every stored event has exactly one ledger row, written in the same transaction) and
-- cost a B-tree insert per event, about a fifth of PostgreSQL's work per stored event (measured with
-- scripts/bench-ingest). A replay now finds its original outcome through the ledger: the ledger
-- row records the event's received_at, and events_ad_received_idx (ad_id, received_at) leads to
-- the row, whose event_id is then checked. events keeps no unique key, which also lets it become a
-- table range-partitioned on received_at with no key to extend.

ALTER TABLE event_ids ADD COLUMN received_at timestamptz;

UPDATE event_ids i SET received_at = e.received_at
FROM events e
WHERE e.session_id = i.session_id AND e.event_id = i.event_id;

-- A ledger row without its event cannot exist (both are written in one transaction); should one
-- exist anyway, this refuses the migration rather than leave a replay that finds nothing.
ALTER TABLE event_ids ALTER COLUMN received_at SET NOT NULL;

ALTER TABLE events DROP CONSTRAINT events_pkey;
