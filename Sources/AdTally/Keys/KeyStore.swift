import Postgres
import Runtime
import Timestamps

/// Advertiser keys as data (API.md section 13; migration 0016): makes, lists and revokes them.
///
/// A key's secret is 32 bytes from the system's secure random source, written `atk_` then 43
/// characters of unpadded base64url. Only its SHA-256 digest reaches the database (as a bound
/// parameter, so no statement text holds it either); the secret is handed back once, to the
/// caller of `create`, and forgotten.
///
/// Every making and revoking of a key moves `advertiser_key_changes.version` in its transaction,
/// which every process's `KeyringSync` watches. The update of that one row also serialises the
/// changes of keys, so the count of an advertiser's active keys (at most `maximumActiveKeys`) is
/// checked and kept in one step.
public struct KeyStore: Sendable {
    /// The most keys an advertiser may have that are not revoked.
    public static let maximumActiveKeys = 20

    public init() {}

    /// A key as the API lists it (never its secret).
    public struct Key: Sendable, Equatable {
        public var keyID: String
        public var advertiserID: String
        public var name: String
        public var scopes: AdvertiserKey.Scopes
        public var createdAt: Timestamp
        public var lastUsedAt: Timestamp?
        public var revokedAt: Timestamp?

        /// What the edge needs of it.
        public var principal: AdvertiserKey { AdvertiserKey(keyID: keyID, advertiserID: advertiserID, scopes: scopes) }

        /// The select list `read` decodes.
        static let columns: PostgresQuery = "key_id, advertiser_id, name, array_to_string(scopes, ','), created_at, last_used_at, revoked_at"

        static func read(_ row: PostgresRow) throws -> Key {
            var columns = row.columns()
            let keyID: String = try columns.next(), advertiserID: String = try columns.next(), name: String = try columns.next()
            let scopeNames: String = try columns.next()
            // The table's check admits only the known names.
            let scopes = AdvertiserKey.Scopes(names: scopeNames.split(separator: ",").map(String.init)) ?? []
            return Key(keyID: keyID, advertiserID: advertiserID, name: name, scopes: scopes, createdAt: try columns.next(),
                       lastUsedAt: try columns.next(), revokedAt: try columns.next())
        }
    }

    /// A key made now: its entry, its secret (shown once) and the secret's digest.
    public struct Created: Sendable {
        public var key: Key
        public var secret: String
        public var digest: SHA256.Digest
    }

    /// What `create` did.
    public enum Creation: Sendable {
        case created(Created)
        /// The advertiser has `maximumActiveKeys` keys that are not revoked (`409 too_many_keys`).
        case tooMany
    }

    /// A new secret: `atk_` and 43 characters of base64url, 256 random bits.
    static func newSecret() -> String {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) }
        return AdvertiserKeyring.prefix + Base64URL.encode(bytes)
    }

    /// A new key id: `key_` and 16 characters of `a-z 0-9`.
    static func newKeyID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var random = SystemRandomNumberGenerator()
        return "key_" + String((0..<16).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] })
    }

    /// Makes a key for `advertiserID`, unless it has the most keys it may have.
    public func create(advertiserID: String, _ request: KeyRequest, on connection: PostgresConnection) throws -> Creation {
        try connection.withTransaction(retry: .transientFailures(attempts: 3)) { transaction in
            _ = try transaction.query("UPDATE advertiser_key_changes SET version = version + 1")
            let active = try transaction.query("""
                SELECT count(*) FROM advertiser_keys WHERE advertiser_id = \(advertiserID) AND revoked_at IS NULL
                """).first?.decode(Int64.self, at: 0) ?? 0
            guard active < Self.maximumActiveKeys else { return .tooMany }
            // A new id and secret until both are unused: with 82 and 256 random bits, the first.
            while true {
                let secret = Self.newSecret()
                let digest = SHA256.hash(secret.utf8)
                let inserted = try transaction.query("""
                    INSERT INTO advertiser_keys (key_id, advertiser_id, name, scopes, digest, created_at)
                    VALUES (\(Self.newKeyID()), \(advertiserID), \(request.name), string_to_array(\(request.scopes.names.joined(separator: ",")), ','),
                            decode(\(digest.hex), 'hex'), now())
                    ON CONFLICT DO NOTHING
                    RETURNING key_id
                    """)
                // The row is read back by a statement of its own: Citus refuses a function that is
                // not immutable (array_to_string) in the RETURNING of a reference table's insert.
                if let keyID = try inserted.first?.decode(String.self, at: 0),
                   let row = try transaction.query("SELECT \(Key.columns) FROM advertiser_keys WHERE key_id = \(keyID)").first {
                    return .created(Created(key: try Key.read(row), secret: secret, digest: digest))
                }
            }
        }
    }

    /// The advertiser's keys, revoked ones included, by `created_at` then `key_id`.
    public func list(advertiserID: String, on connection: PostgresConnection) throws -> [Key] {
        try connection.query("""
            SELECT \(Key.columns) FROM advertiser_keys WHERE advertiser_id = \(advertiserID) ORDER BY created_at, key_id COLLATE "C"
            """).rows.map(Key.read)
    }

    /// A key revoked, with its digest; nil for an unknown key or another advertiser's. Revoking a
    /// revoked key changes nothing (the first `revoked_at` stays).
    public func revoke(advertiserID: String, keyID: String, on connection: PostgresConnection) throws -> (Key, SHA256.Digest)? {
        try connection.withTransaction(retry: .transientFailures(attempts: 3)) { transaction in
            let select: PostgresQuery = "\(Key.columns), encode(digest, 'hex')"
            // RETURNING names no function (Citus refuses one that is not immutable there, on a
            // reference table): the row is read back by a statement of its own.
            let revoked = try transaction.query("""
                UPDATE advertiser_keys SET revoked_at = now()
                WHERE key_id = \(keyID) AND advertiser_id = \(advertiserID) AND revoked_at IS NULL
                RETURNING key_id
                """)
            if revoked.first != nil {
                _ = try transaction.query("UPDATE advertiser_key_changes SET version = version + 1")
            }
            guard let row = try transaction.query("""
                SELECT \(select) FROM advertiser_keys WHERE key_id = \(keyID) AND advertiser_id = \(advertiserID)
                """).first else { return nil }
            // The table's check keeps every digest 32 bytes long.
            guard let digest = SHA256.Digest(hex: try row.decode(String.self, at: 7)) else {
                throw PostgresError(kind: .typeMismatch, message: "advertiser_keys.digest of \(keyID) is not 32 bytes")
            }
            return (try Key.read(row), digest)
        }
    }
}
