-- AdTally schema, version 16 (API 1.5, section 13): advertiser keys, and the secret of session_ref.
--
-- 1. A key belongs to one advertiser. Its secret is shown once, when it is made; what is kept is
--    its SHA-256 digest (computed by AdTally, which never sends the key to the database), so that
--    a copy of the database lets no one sign in. Each process keeps the keys in memory and reads
--    them again when advertiser_key_changes.version moves (every making and revoking of a key
--    moves it, in the same transaction), so that a revocation reaches every process within the
--    time between two reads. last_used_at is written by the processes a few times a minute.
-- 2. session_ref is HMAC-SHA-256 keyed by a secret made here, once per database: 32 bytes from
--    three random UUIDs (PostgreSQL's strong random source, 366 random bits) through SHA-256. It is
--    never shown and never logged; every process reads it to compute the same session_ref.
--
-- On Citus all three are reference tables: small, written through the coordinator, read on every
-- node. Nothing here locks an existing table.

CREATE TABLE advertiser_keys (
    key_id        text COLLATE "C" PRIMARY KEY,
    advertiser_id text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    scopes        text[] NOT NULL CHECK (scopes <@ ARRAY['conversions', 'reports'] AND cardinality(scopes) > 0),
    digest        bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    created_at    timestamptz NOT NULL,
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX advertiser_keys_advertiser_idx ON advertiser_keys (advertiser_id, created_at, key_id);

CREATE TABLE advertiser_key_changes (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint NOT NULL
);
INSERT INTO advertiser_key_changes (version) VALUES (0);

CREATE TABLE adtally_secrets (
    name   text COLLATE "C" PRIMARY KEY,
    secret bytea NOT NULL CHECK (length(secret) = 32)
);
INSERT INTO adtally_secrets (name, secret)
VALUES ('session_ref', sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())));

SELECT adtally_distribute('advertiser_keys', NULL);
SELECT adtally_distribute('advertiser_key_changes', NULL);
SELECT adtally_distribute('adtally_secrets', NULL);
