import Runtime
import Synchronization
import Timestamps

/// Every advertiser key of the database, in memory, by the SHA-256 digest of its secret (API.md
/// section 13): the edge resolves a key with one hash and one lookup, on the IO queue, without a
/// round trip. `KeyringSync` (the Keys slice) fills it from `advertiser_keys` and keeps it fresh;
/// the process that makes or revokes a key teaches it at once (`learn`). It notes when each key
/// was last used, for `KeyringSync` to write as `last_used_at`.
///
/// Until the first read every key is unknown (`401`); afterwards, while the database cannot be
/// read, the keys this process knows stay in force.
public final class AdvertiserKeyring: Sendable {
    /// What a presented key is.
    public enum Lookup: Sendable, Equatable {
        case unknown
        case revoked(AdvertiserKey)
        case active(AdvertiserKey)
    }

    /// One key as the keyring keeps it.
    public struct Entry: Sendable, Equatable {
        public let key: AdvertiserKey
        public let revoked: Bool

        public init(key: AdvertiserKey, revoked: Bool) {
            self.key = key
            self.revoked = revoked
        }
    }

    private struct State {
        /// By the SHA-256 digest of the key.
        var byDigest: [SHA256.Digest: Entry] = [:]
        /// The version of `advertiser_key_changes` the keys were read at; nil before the first read.
        var version: Int64?
        /// Keys used since `takeUses`, with when they were last used.
        var used: [String: Timestamp] = [:]
    }

    /// The prefix every key starts with, so that secret scanners find a leaked one.
    public static let prefix = "atk_"

    private let state = Mutex(State())
    private let clock: any WallClock

    public init(clock: any WallClock = SystemClock()) {
        self.clock = clock
    }

    /// Whether a bearer credential has the form of a key (`atk_` then 43 characters): anything else
    /// is not looked up (and is an unknown token).
    public static func looksLikeKey(_ credential: Substring.UTF8View) -> Bool {
        credential.count == 47 && credential.starts(with: prefix.utf8)
    }

    /// What `presented` (the bearer credential, `atk_…`) is. An active key's use is noted.
    public func lookup(_ presented: Substring.UTF8View) -> Lookup {
        let digest = SHA256.hash(presented)
        let now = clock.now()
        return state.withLock { state in
            guard let entry = state.byDigest[digest] else { return .unknown }
            if entry.revoked { return .revoked(entry.key) }
            state.used[entry.key.keyID] = now
            return .active(entry.key)
        }
    }

    /// A key made or revoked by this process: known at once, before the next read.
    public func learn(digest: SHA256.Digest, _ entry: Entry) {
        state.withLock { $0.byDigest[digest] = entry }
    }

    /// The version the keys were last read at (nil: never read).
    public var version: Int64? { state.withLock { $0.version } }

    /// Every key as read at `version`, in place of those in memory.
    public func replace(_ entries: [SHA256.Digest: Entry], version: Int64) {
        state.withLock { state in
            state.byDigest = entries
            state.version = version
        }
    }

    /// The keys in memory that are active and revoked (`adtally_advertiser_keys{state}`).
    public var counts: (active: Int, revoked: Int) {
        state.withLock { state in
            let revoked = state.byDigest.values.count { $0.revoked }
            return (state.byDigest.count - revoked, revoked)
        }
    }

    /// The keys used since the last call, each with its latest use; forgotten here.
    public func takeUses() -> [String: Timestamp] {
        state.withLock { state in
            defer { state.used = [:] }
            return state.used
        }
    }

    /// Uses that could not be written: kept for the next write, never earlier than a later use.
    public func restoreUses(_ uses: [String: Timestamp]) {
        state.withLock { state in
            for (keyID, time) in uses where (state.used[keyID] ?? time) <= time { state.used[keyID] = time }
        }
    }
}
