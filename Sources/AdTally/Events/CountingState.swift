import Contract
import Postgres
import Timestamps

/// The rows the counting rules (rules 3 and 4) read and the claims that settle them: what
/// `EventStore` sends to PostgreSQL for them, and how it reads the answers. No rule is written here:
/// these statements read facts, take locks and record verdicts that `ImpressionRule` and `ClickRule`
/// gave.
///
/// Locks, and why the verdicts hold across processes:
/// - A click is decided under its session's `sessions` row lock (taken by `lockSessions`, before
///   anything is read for it). Every writer of click state (`sessions.last_click_*`,
///   `session_ads.last_click_*`) and feed registration hold that lock, so what the rule reads stays
///   true until the transaction commits: clicks of one session, and a refresh racing them, are
///   decided one transaction at a time, as some serial order would.
/// - An impression is decided without the session's lock: "served" only changes from false to true
///   (a forgotten session's rows are the exception, and a vanished row is an ad not served), and
///   "first" is the claim (`claim`), a conditional update under the pair's row lock, so that of
///   concurrent claims exactly one wins.
/// - Locks are taken in one order everywhere: a transaction's `sessions` rows first, in key order,
///   then its `session_ads` rows in key order (feed registration: its session, then its ads in
///   order), so two transactions never wait for each other in a circle.
enum CountingState {
    /// Every statement of the transaction reads its rows by key, in its input's order
    /// (`adtally_key_access_only`, migration 0005: why, there). `adtally_begin_batch` does it for an
    /// event transaction; other transactions that lock several rows send this.
    static let keyAccessOnly: PostgresQuery = "SELECT adtally_key_access_only()"

    // MARK: Sessions (rule 4)

    /// A session's row as the click rule reads it.
    struct SessionRow {
        let sessionID: String
        let currentSnapshotID: String?
        let lastAcceptedClick: ClickRule.AcceptedClick?
        /// The UTC clock hour the session's count of accepted clicks is for (nil: none yet).
        let clickHour: Timestamp?
        /// The session's accepted clicks received in `clickHour`.
        let clicksInHour: Int

        init(_ row: PostgresRow) throws {
            var columns = row.columns()
            sessionID = try columns.next()
            currentSnapshotID = try columns.next()
            let adID = try columns.next(String?.self)
            let occurredAt = try columns.next(Timestamp?.self)
            if let adID, let occurredAt {
                lastAcceptedClick = ClickRule.AcceptedClick(adID: adID, occurredAt: occurredAt)
            } else {
                lastAcceptedClick = nil
            }
            clickHour = try columns.next()
            clicksInHour = try columns.next()
        }

        /// The session's accepted clicks in the UTC clock hour starting at `hour`.
        func acceptedClicks(inHour hour: Timestamp) -> Int {
            clickHour == hour ? clicksInHour : 0
        }
    }

    /// Locks the rows of `sessionIDs` (sorted, distinct) that have clicks (`clicks`, in the same
    /// order), and marks every session active on the batch's day (the UTC date of its
    /// `received_at`) where it is not yet, and returns the rows it locked. An update rather than
    /// `SELECT ... FOR UPDATE`: Citus runs it across shards, which it does not for a locking select.
    /// A session is marked at most once a day, which is what idle-session forgetting needs
    /// (`last_active_on`), and one statement takes all of a batch's session locks, in key order. A
    /// session without a row has no snapshot: nothing to lock, and nothing any click of it can be
    /// accepted against.
    ///
    /// This and the other statements on a batch's session rows take the batch's one session (nil
    /// when it has several) and filter by it, which their join already implies: a one-session
    /// batch, the common case, is then a router query on Citus (one shard, one worker), where it
    /// would otherwise run on every shard. With nil, PostgreSQL folds the filter away before
    /// planning; with a session, it becomes an index condition. (`session_id = ANY` of all the
    /// sessions would prune a multi-session batch too, but PostgreSQL then reads the sessions' rows
    /// by a bitmap scan instead of probing the key, which is slower and locks out of key order.)
    /// The day is the setting `adtally.batch_day`, which `adtally_begin_batch` set earlier in the
    /// transaction (migration 0011): Citus evaluates `current_setting` where the transaction
    /// entered and sends the shard a constant, where a subquery would be a subplan of its own.
    static func lockSessions(_ sessionIDs: [String], clicks: [Bool], topology: EventTopology) -> PostgresQuery {
        """
        UPDATE sessions AS s SET last_active_on = greatest(s.last_active_on, current_setting('adtally.batch_day')::date)
        FROM unnest(\(PostgresBinaryArray.text(sessionIDs))::text[], \(PostgresBinaryArray.bool(clicks))::bool[]) AS u(s, c)
        WHERE s.session_id = u.s AND \(topology.sessionFilter(sessionIDs, column: "s.session_id"))
          AND (u.c OR s.last_active_on < current_setting('adtally.batch_day')::date)
        RETURNING s.session_id, s.current_snapshot_id, s.last_click_ad_id, s.last_click_occurred_at, s.click_hour, s.clicks_in_hour
        """
    }

    /// What a batch records on a session whose clicks it accepted: its last accepted click, and
    /// its count of accepted clicks in the clock hour they were received in.
    struct SessionClicks {
        let sessionID: String
        let last: ClickRule.AcceptedClick
        let hour: Timestamp
        let clicksInHour: Int
    }

    /// Records each session's last accepted click and its clicks in the hour (sessions whose rows
    /// this transaction locked: no other can have changed them).
    static func recordLastClicks(_ sessions: [SessionClicks], topology: EventTopology) -> PostgresQuery {
        let occurredAt = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: sessions.map(\.last.occurredAt.microsecondsSinceEpoch))
        let hours = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: sessions.map(\.hour.microsecondsSinceEpoch))
        let counts = PostgresBinaryArray.int4(sessions.map { Int32(clamping: $0.clicksInHour) })
        return """
            UPDATE sessions AS s SET last_click_ad_id = u.a, last_click_occurred_at = u.o, click_hour = u.h, clicks_in_hour = u.n
            FROM unnest(\(PostgresBinaryArray.text(sessions.map(\.sessionID)))::text[], \(PostgresBinaryArray.text(sessions.map(\.last.adID)))::text[],
                        \(occurredAt)::timestamptz[], \(hours)::timestamptz[], \(counts)::int[]) AS u(s, a, o, h, n)
            WHERE s.session_id = u.s AND \(topology.sessionFilter(sessions.map(\.sessionID), column: "s.session_id"))
            """
    }

    // MARK: Pairs (rules 3 and 4)

    /// A (session, ad) pair's `session_ads` row: it exists once the ad was served to the session.
    struct PairRow {
        /// The pair's position in the arrays `readPairs` sent.
        let index: Int
        /// The ad's row in the session's current snapshot; nil when the ad is not in it
        /// (registration keeps this in step with `sessions.current_snapshot_id`).
        let currentPosition: Int32?
        let impressionCounted: Bool
        /// When the pair's last accepted click was received.
        let lastClickAt: Timestamp?

        init(_ row: PostgresRow) throws {
            var columns = row.columns()
            index = try columns.next(Int.self) - 1
            currentPosition = try columns.next(Int64?.self).map { Int32(truncatingIfNeeded: $0) }
            impressionCounted = try columns.next()
            lastClickAt = try columns.next()
        }
    }

    /// The rows of `pairs` that exist, each named by its position in `pairs` (an inner join:
    /// Citus refuses an outer join of a table function with a distributed table).
    static func readPairs(_ pairs: [SessionAd], topology: EventTopology) -> PostgresQuery {
        """
        SELECT u.n, x.current_position, x.impression_event_id IS NOT NULL, x.last_click_at
        FROM unnest(\(PostgresBinaryArray.text(pairs.map(\.sessionID)))::text[], \(PostgresBinaryArray.text(pairs.map(\.adID)))::text[])
             WITH ORDINALITY AS u(s, a, n)
        JOIN session_ads x ON x.session_id = u.s AND x.ad_id = u.a
        WHERE \(topology.sessionFilter(pairs.map(\.sessionID), column: "x.session_id"))
        """
    }

    /// Claims the first impression of each pair that has an impression candidate, and records the
    /// last accepted click of each pair that has one, in one update of the pairs' rows in key order
    /// (`claims` sorted). The impression claim is conditional, under the row lock: it wins only if
    /// no impression of the pair is counted yet. Returns the claims (by position) whose impression won.
    static func claim(_ claims: [PairClaim], receivedAt: Timestamp, topology: EventTopology) -> PostgresQuery {
        """
        UPDATE session_ads AS x SET
            impression_event_id = coalesce(x.impression_event_id, u.i),
            impression_claimed_at = CASE WHEN x.impression_event_id IS NULL AND u.i IS NOT NULL THEN \(receivedAt) ELSE x.impression_claimed_at END,
            last_click_event_id = coalesce(u.c, x.last_click_event_id),
            last_click_at = CASE WHEN u.c IS NOT NULL THEN \(receivedAt) ELSE x.last_click_at END
        FROM unnest(\(PostgresBinaryArray.text(claims.map(\.pair.sessionID)))::text[], \(PostgresBinaryArray.text(claims.map(\.pair.adID)))::text[],
                    \(IdentityColumns.uuids(claims.map(\.impressionEventID)))::uuid[], \(IdentityColumns.uuids(claims.map(\.clickEventID)))::uuid[])
             WITH ORDINALITY AS u(s, a, i, c, n)
        WHERE x.session_id = u.s AND x.ad_id = u.a AND \(topology.sessionFilter(claims.map(\.pair.sessionID), column: "x.session_id"))
          AND (u.c IS NOT NULL OR x.impression_event_id IS NULL)
        RETURNING u.n, coalesce(x.impression_event_id = u.i, false)
        """
    }

    /// What `claim` writes for one pair.
    struct PairClaim {
        let pair: SessionAd
        /// The pair's index in the batch's pairs.
        let pairIndex: Int
        /// The impression that counts if it is still the first; nil for none.
        var impressionEventID: String?
        /// The pair's last click accepted in this batch; nil for none.
        var clickEventID: String?
    }

    /// A row `claim` returned: the claim's position, and whether its impression claim won.
    struct ClaimRow {
        let index: Int
        let impressionWon: Bool

        init(_ row: PostgresRow) throws {
            var columns = row.columns()
            index = try columns.next(Int.self) - 1
            impressionWon = try columns.next()
        }
    }

    // MARK: Earlier snapshots (rule 4, the grace window)

    /// A snapshot of the session other than its current one, which a click names.
    struct SnapshotRow {
        let sessionID: String
        let snapshotID: String
        let registeredAt: Timestamp
        let replacedAt: Timestamp?

        init(_ row: PostgresRow) throws {
            var columns = row.columns()
            sessionID = try columns.next()
            snapshotID = try columns.next()
            registeredAt = try columns.next()
            replacedAt = try columns.next()
        }
    }

    /// The snapshots that clicks name, when they are their session's but not its current one
    /// (read after the sessions were locked: the current one cannot change meanwhile).
    static func readEarlierSnapshots(_ named: [SessionSnapshot], topology: EventTopology) -> PostgresQuery {
        """
        SELECT sn.session_id, sn.snapshot_id, sn.registered_at, sn.replaced_at
        FROM unnest(\(PostgresBinaryArray.text(named.map(\.sessionID)))::text[], \(PostgresBinaryArray.text(named.map(\.snapshotID)))::text[]) AS u(s, n)
        JOIN sessions s ON s.session_id = u.s AND s.current_snapshot_id IS DISTINCT FROM u.n
        JOIN snapshots sn ON sn.session_id = s.session_id AND sn.snapshot_id = u.n
        WHERE \(topology.sessionFilter(named.map(\.sessionID), column: "s.session_id"))
        """
    }

    /// An ad's row in a snapshot.
    struct SnapshotAdRow {
        let sessionID: String
        let snapshotID: String
        let adID: String
        let position: Int32

        init(_ row: PostgresRow) throws {
            var columns = row.columns()
            sessionID = try columns.next()
            snapshotID = try columns.next()
            adID = try columns.next()
            position = Int32(truncatingIfNeeded: try columns.next(Int64.self))
        }
    }

    /// Where the clicked ads are in the earlier snapshots their clicks name (those that hold them).
    static func readSnapshotAds(_ clicks: [(named: SessionSnapshot, adID: String)], topology: EventTopology) -> PostgresQuery {
        """
        SELECT a.session_id, a.snapshot_id, a.ad_id, a.position
        FROM unnest(\(PostgresBinaryArray.text(clicks.map(\.named.sessionID)))::text[], \(PostgresBinaryArray.text(clicks.map(\.named.snapshotID)))::text[],
                    \(PostgresBinaryArray.text(clicks.map(\.adID)))::text[]) AS u(s, n, a)
        JOIN sessions s ON s.session_id = u.s AND s.current_snapshot_id IS DISTINCT FROM u.n
        JOIN snapshot_ads a ON a.session_id = s.session_id AND a.snapshot_id = u.n AND a.ad_id = u.a
        WHERE \(topology.sessionFilter(clicks.map(\.named.sessionID), column: "s.session_id"))
        """
    }
}

/// A (session, ad) pair: the unit of the impression rule and of the click window.
struct SessionAd: Hashable, Comparable {
    let sessionID: String
    let adID: String

    /// Byte order of session then ad, the order of the primary key (`COLLATE "C"`), in which rows
    /// are locked.
    static func < (lhs: SessionAd, rhs: SessionAd) -> Bool {
        if lhs.sessionID != rhs.sessionID { return lhs.sessionID.utf8Precedes(rhs.sessionID) }
        return lhs.adID.utf8Precedes(rhs.adID)
    }
}

/// A snapshot named by a click, with its session.
struct SessionSnapshot: Hashable {
    let sessionID: String
    let snapshotID: String
}
