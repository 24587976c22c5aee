import Postgres
import Runtime
import Synchronization

/// `session_ref` (API.md section 13): what an advertiser sees in place of a session id, so that it
/// can tell which of its events came from one session without learning the publisher's id. The
/// first 16 hexadecimal digits of HMAC-SHA-256 over the advertiser's id, a zero byte and the
/// session id, keyed by the secret the database made once at migration (`adtally_secrets`,
/// migration 0016): the same on every process and every call, different for two advertisers.
///
/// The secret is read once per process, on first use, from the database the reports read (a
/// standby has it too); it is never logged, and never leaves this type.
public final class SessionRefs: Sendable {
    private let mac = Mutex<HMACSHA256?>(nil)

    public init() {}

    /// The keyed MAC, reading the secret on `connection` the first time.
    public func keyed(on connection: PostgresConnection) throws -> Keyed {
        if let known = mac.withLock({ $0 }) { return Keyed(mac: known) }
        guard let hex = try connection.query("SELECT encode(secret, 'hex') FROM adtally_secrets WHERE name = 'session_ref'").first?
            .decode(String.self, at: 0), let secret = SHA256.Digest(hex: hex) else {
            throw PostgresError(kind: .statementFailed, message: "the session_ref secret is missing from adtally_secrets (migration 0016)")
        }
        let made = HMACSHA256(key: secret.bytes)
        mac.withLock { $0 = made }
        return Keyed(mac: made)
    }

    /// The MAC with its key, for one export.
    public struct Keyed: Sendable {
        let mac: HMACSHA256

        /// The `session_ref` of `sessionID` for `advertiserID`.
        public func ref(advertiserID: String, sessionID: String) -> String {
            var message = Array(advertiserID.utf8)
            message.append(0)
            message.append(contentsOf: sessionID.utf8)
            return String(mac.code(message).hex.prefix(16))
        }
    }
}
