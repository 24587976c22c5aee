import Foundation
import Postgres
import Timestamps

/// Registers the feeds the feed backend served (API.md section 1) and answers which one is current.
/// A registration locks the session's row, so a refresh replaces the current snapshot atomically
/// (the snapshot tables and the session's `session_ads` rows, in one transaction) and two
/// registrations for one session take turns; the ad-to-advertiser rule is re-read after the
/// insert so that two snapshots racing to introduce one ad cannot both win.
public struct FeedSnapshotStore: Sendable {
    public init() {}

    /// The answer to a registration.
    public enum RegistrationResult: Sendable, Equatable {
        /// Registered and now current (`201`).
        case created
        /// The current snapshot sent again (`200`).
        case alreadyCurrent
        /// The id exists with other content or for another session (`409 snapshot_conflict`).
        case snapshotConflict
        /// Registered before with this content, but a newer one is current (`409 snapshot_superseded`).
        case superseded
        /// An ad is known with another advertiser (`409 ad_advertiser_conflict`).
        case adAdvertiserConflict(adID: String, knownAdvertiserID: String)
        /// The session was erased (`410 session_erased`, API 1.4); nothing was stored.
        case sessionErased
    }

    /// A registered snapshot, for `GET /v1/sessions/{id}/feed`.
    public struct CurrentFeed: Sendable, Equatable {
        public let sessionID: String
        public let snapshotID: String
        public let registeredAt: Timestamp
        public let ads: [AdInput]
    }

    /// Registers `snapshot` for `sessionID`. Runs its own transaction on `connection`, again when
    /// PostgreSQL reports a deadlock or serialization failure (the transaction was rolled back as a
    /// whole, so running it again is safe), up to five times. Registration and event claims lock a
    /// session's `session_ads` rows in the same key order, so a deadlock takes something outside
    /// that order; a client should not see a `500` for it either way.
    public func register(_ snapshot: FeedSnapshotInput, sessionID: String, now: Timestamp, on connection: PostgresConnection) throws -> RegistrationResult {
        let fingerprint = snapshot.contentFingerprint
        do {
            return try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
                try register(snapshot, fingerprint: fingerprint, sessionID: sessionID, now: now, in: transaction)
            }
        } catch let conflict as AdvertiserConflict {
            return .adAdvertiserConflict(adID: conflict.adID, knownAdvertiserID: conflict.knownAdvertiserID)
        } catch is SessionErased {
            return .sessionErased
        }
    }

    private func register(_ snapshot: FeedSnapshotInput, fingerprint: String, sessionID: String, now: Timestamp,
                          in connection: PostgresTransaction) throws -> RegistrationResult {
        try connection.query("INSERT INTO sessions (session_id) VALUES (\(sessionID)) ON CONFLICT (session_id) DO NOTHING")
        let current = try connection.query(
            "SELECT current_snapshot_id FROM sessions WHERE session_id = \(sessionID) FOR UPDATE"
        ).first?.decode(String?.self, at: 0)
        // Checked under the session's row lock, in a statement after it: an erasure that committed
        // its suppression before is seen here; one that commits later deletes the session's row
        // first, which waits for this transaction (migration 0014). Thrown to roll back the row
        // the insert above may have made.
        if try SessionSuppression.isErased(sessionID, in: connection) { throw SessionErased() }

        // The snapshot id's owner; claimed now when new (a concurrent claim by another session waits here).
        let owner = try connection.query("""
            WITH claim AS (
                INSERT INTO snapshot_owners (snapshot_id, session_id) VALUES (\(snapshot.snapshotID), \(sessionID))
                ON CONFLICT (snapshot_id) DO NOTHING RETURNING session_id
            )
            SELECT session_id, true FROM claim
            UNION ALL
            SELECT session_id, false FROM snapshot_owners WHERE snapshot_id = \(snapshot.snapshotID)
            """).first
        let isNew = try owner?.decode(Bool.self, at: 1) ?? false
        if !isNew {
            let ownerSession = try owner?.decode(String.self, at: 0)
            guard ownerSession == sessionID else { return .snapshotConflict }
            let stored = try connection.query(
                "SELECT fingerprint FROM snapshots WHERE session_id = \(sessionID) AND snapshot_id = \(snapshot.snapshotID)"
            ).first?.decode(String.self, at: 0)
            guard stored == fingerprint else { return .snapshotConflict }
            return current == snapshot.snapshotID ? .alreadyCurrent : .superseded
        }

        // One advertiser per ad, forever: insert what is new, then compare with what is stored.
        let ads = snapshot.ads
        if !ads.isEmpty {
            let rows = try connection.query("""
                WITH fresh AS (
                    INSERT INTO ads (ad_id, advertiser_id)
                    SELECT * FROM unnest(\(PostgresArray(ads.map(\.adID)))::text[], \(PostgresArray(ads.map(\.advertiserID)))::text[])
                                  AS u(ad_id, advertiser_id) ORDER BY 1
                    ON CONFLICT (ad_id) DO NOTHING
                    RETURNING ad_id
                )
                SELECT a.ad_id, a.advertiser_id FROM ads a
                WHERE a.ad_id = ANY (\(PostgresArray(ads.map(\.adID)))::text[]) AND a.ad_id NOT IN (SELECT ad_id FROM fresh)
                """).rows
            var known: [String: String] = [:]
            for row in rows { known[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1) }
            for ad in ads {
                if let advertiser = known[ad.adID], advertiser != ad.advertiserID {
                    throw AdvertiserConflict(adID: ad.adID, knownAdvertiserID: advertiser)
                }
            }
        }
        try connection.query("""
            INSERT INTO snapshots (session_id, snapshot_id, fingerprint, ad_count, registered_at)
            VALUES (\(sessionID), \(snapshot.snapshotID), \(fingerprint), \(ads.count), \(now))
            """)
        if !ads.isEmpty {
            try connection.query("""
                INSERT INTO snapshot_ads (session_id, snapshot_id, ad_id, position, advertiser_id, url)
                SELECT \(sessionID), \(snapshot.snapshotID), *
                FROM unnest(\(PostgresArray(ads.map(\.adID)))::text[], \(PostgresArray(ads.map(\.position)))::int[],
                            \(PostgresArray(ads.map(\.advertiserID)))::text[], \(PostgresArray(ads.map(\.url)))::text[])
                """)
        }
        try connection.query("""
            UPDATE sessions SET current_snapshot_id = \(snapshot.snapshotID), current_since = \(now),
                                last_active_on = greatest(last_active_on, (\(now)::timestamptz AT TIME ZONE 'UTC')::date)
            WHERE session_id = \(sessionID)
            """)
        if let replaced = current {
            // When the replaced snapshot stopped being current: the grace window of clicks that name it.
            try connection.query("UPDATE snapshots SET replaced_at = \(now) WHERE session_id = \(sessionID) AND snapshot_id = \(replaced)")
        }
        try updateSessionAds(sessionID: sessionID, snapshot: snapshot, now: now, in: connection)
        return .created
    }

    /// Makes the session's rows in `session_ads` (what the counting rules read) follow the new
    /// current snapshot: every ad in it gets a row, now served, with its snapshot and position; every
    /// ad of the previous current snapshot that is not in the new one loses its position. One
    /// upsert in ad id order (byte order, as the event claims lock rows) under the session's lock.
    private func updateSessionAds(sessionID: String, snapshot: FeedSnapshotInput, now: Timestamp, in connection: PostgresTransaction) throws {
        try connection.query("""
            INSERT INTO session_ads AS x (session_id, ad_id, first_served_at, current_snapshot_id, current_position)
            SELECT \(sessionID)::text, coalesce(n.ad_id, o.ad_id), \(now)::timestamptz, CASE WHEN n.ad_id IS NOT NULL THEN \(snapshot.snapshotID)::text END,
                   n.position
            FROM unnest(\(PostgresArray(snapshot.ads.map(\.adID)))::text[], \(PostgresArray(snapshot.ads.map(\.position)))::int[]) AS n(ad_id, position)
            FULL JOIN (SELECT ad_id FROM session_ads WHERE session_id = \(sessionID) AND current_snapshot_id IS NOT NULL) o
                ON o.ad_id = n.ad_id
            ORDER BY coalesce(n.ad_id, o.ad_id) COLLATE "C"
            ON CONFLICT (session_id, ad_id) DO UPDATE
            SET current_snapshot_id = EXCLUDED.current_snapshot_id, current_position = EXCLUDED.current_position
            """)
    }

    /// The session's current snapshot, or nil when it has none.
    public func current(sessionID: String, on connection: PostgresConnection) throws -> CurrentFeed? {
        let rows = try connection.query("""
            SELECT s.current_snapshot_id, (extract(epoch FROM sn.registered_at) * 1000000)::bigint,
                   a.ad_id, a.position, a.advertiser_id, a.url
            FROM sessions s
            JOIN snapshots sn ON sn.session_id = s.session_id AND sn.snapshot_id = s.current_snapshot_id
            LEFT JOIN snapshot_ads a ON a.session_id = s.session_id AND a.snapshot_id = s.current_snapshot_id
            WHERE s.session_id = \(sessionID)
            ORDER BY a.position
            """).rows
        guard let first = rows.first else { return nil }
        var ads: [AdInput] = []
        for row in rows {
            guard let adID = try row.decode(String?.self, at: 2) else { continue }
            ads.append(AdInput(adID: adID, position: Int32(truncatingIfNeeded: try row.decode(Int64.self, at: 3)),
                               advertiserID: try row.decode(String.self, at: 4), url: try row.decode(String.self, at: 5)))
        }
        return CurrentFeed(sessionID: sessionID, snapshotID: try first.decode(String.self, at: 0),
                           registeredAt: Timestamp(microsecondsSinceEpoch: try first.decode(Int64.self, at: 1)), ads: ads)
    }
}

/// Thrown inside the registration transaction to roll it back when an ad changes advertiser.
/// Thrown inside a registration to roll it back: the session is erased.
struct SessionErased: Error {}

struct AdvertiserConflict: Error {
    let adID: String
    let knownAdvertiserID: String
}
