-- AdTally schema, version 1: feed snapshots, events with their outcomes, and the claims that make
-- the counting rules hold across processes (API.md sections 1 and 2).
--
-- Distribution rule (DESIGN.md): every primary key and unique constraint of a row that belongs to a
-- session includes session_id, so these tables distribute by session_id on Citus unchanged. Two
-- lookups are global by nature and live in tables keyed by their own identifier instead (they
-- distribute by that key): snapshot_owners (a snapshot_id names one session, forever) and
-- event_ids (an event_id is one event, forever). ads is small and global (a reference table).

-- An ad belongs to one advertiser forever.
CREATE TABLE ads (
    ad_id          text COLLATE "C"        PRIMARY KEY,
    advertiser_id  text COLLATE "C"        NOT NULL,
    first_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ads_advertiser_idx ON ads (advertiser_id, ad_id);

-- A session and its current feed. The row is locked FOR UPDATE by a snapshot registration and
-- read by clicks, so "the current snapshot" changes atomically.
CREATE TABLE sessions (
    session_id           text COLLATE "C"        PRIMARY KEY,
    current_snapshot_id  text COLLATE "C",
    current_since        timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- Which session a snapshot_id belongs to (snapshot_conflict when another session reuses it).
CREATE TABLE snapshot_owners (
    snapshot_id  text COLLATE "C" PRIMARY KEY,
    session_id   text COLLATE "C" NOT NULL
);

-- Every snapshot registered for a session, current or earlier. fingerprint is the canonical form of
-- the set of (ad_id, position, advertiser_id, url), to tell a retry from a conflicting reuse.
CREATE TABLE snapshots (
    session_id     text COLLATE "C"        NOT NULL,
    snapshot_id    text COLLATE "C"        NOT NULL,
    fingerprint    text        NOT NULL,
    ad_count       integer     NOT NULL CHECK (ad_count BETWEEN 0 AND 1000),
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (session_id, snapshot_id)
);

CREATE TABLE snapshot_ads (
    session_id     text COLLATE "C"    NOT NULL,
    snapshot_id    text COLLATE "C"    NOT NULL,
    ad_id          text COLLATE "C"    NOT NULL,
    position       integer NOT NULL CHECK (position >= 0),
    advertiser_id  text COLLATE "C"    NOT NULL,
    url            text    NOT NULL,
    PRIMARY KEY (session_id, snapshot_id, ad_id),
    UNIQUE (session_id, snapshot_id, position),
    FOREIGN KEY (session_id, snapshot_id) REFERENCES snapshots (session_id, snapshot_id) ON DELETE CASCADE
);
-- "Was this ad ever served to this session" (impression rule 3a) and "where is it in the current
-- snapshot" (click rule 4), both from one index-only probe per (session_id, ad_id).
CREATE INDEX snapshot_ads_served_idx ON snapshot_ads (session_id, ad_id) INCLUDE (snapshot_id, position);

-- The idempotency ledger: an event_id is claimed once, with the identity a replay must match.
CREATE TABLE event_ids (
    event_id    uuid PRIMARY KEY,
    session_id  text COLLATE "C" NOT NULL,
    type        text NOT NULL,
    ad_id       text COLLATE "C" NOT NULL
);

-- Identifiers (session, ad, advertiser, snapshot ids) are ASCII and compared byte by byte
-- (COLLATE "C"): cheap comparisons in every index, whatever the database's locale, and index order
-- equals the byte order that reports sort by.

-- Every well-formed event with its outcome (rule 5), for billing and disputes. Reports count by
-- received_at (server clock). Retention: the table is keyed so that it can become a range-partitioned
-- table on received_at (primary key extended with received_at; idempotency lives in event_ids).
CREATE TABLE events (
    session_id        text COLLATE "C"             NOT NULL,
    event_id          uuid             NOT NULL,
    type              text             NOT NULL CHECK (type IN ('impression', 'click')),
    ad_id             text COLLATE "C"             NOT NULL,
    status            text             NOT NULL CHECK (status IN ('accepted', 'duplicate', 'rejected')),
    reason            text,
    occurred_at       timestamptz      NOT NULL,
    received_at       timestamptz      NOT NULL,
    snapshot_id       text COLLATE "C",
    position          integer,
    visible_fraction  double precision,
    visible_ms        integer,
    PRIMARY KEY (session_id, event_id),
    CHECK ((status = 'accepted') = (reason IS NULL))
);
-- Per-ad reports over a time range lead with the filtered columns.
CREATE INDEX events_ad_received_idx ON events (ad_id, received_at) INCLUDE (type, status, reason);
-- Listings over a time range for all ads. received_at only grows, so a BRIN index (a few pages,
-- next to nothing per insert) narrows a range scan as well as a B-tree would.
CREATE INDEX events_received_idx ON events USING brin (received_at);

-- The first counted impression of an ad in a session (rule 3c): the primary key is the decision.
CREATE TABLE impression_claims (
    session_id   text COLLATE "C"        NOT NULL,
    ad_id        text COLLATE "C"        NOT NULL,
    event_id     uuid        NOT NULL,
    claimed_at   timestamptz NOT NULL,
    PRIMARY KEY (session_id, ad_id)
);

-- The last accepted click of an ad in a session (rule 4d): an upsert with a condition on this row
-- decides, under the row lock, whether a click opens a new window.
CREATE TABLE click_windows (
    session_id        text COLLATE "C"        NOT NULL,
    ad_id             text COLLATE "C"        NOT NULL,
    last_accepted_at  timestamptz NOT NULL,
    PRIMARY KEY (session_id, ad_id)
);
