import Synchronization

/// How the edge answered each credential it was shown (`adtally_auth_total{credential,outcome}`):
/// counted on the IO queues, read by `/metrics`.
public final class AuthCounts: Sendable {
    /// The credential a request presented.
    public enum Credential: String, Sendable, CaseIterable {
        case token
        case advertiserKey = "advertiser_key"
    }

    /// What became of it: accepted, unknown (`401`), revoked (`401`, keys only), or known without
    /// the endpoint's scope (`403`).
    public enum Outcome: String, Sendable, CaseIterable {
        case ok, unknown, revoked, forbidden
    }

    // One atomic a series (atomics cannot live in an array): two credentials, four outcomes.
    private let tokenOK = Atomic<UInt64>(0), tokenUnknown = Atomic<UInt64>(0), tokenRevoked = Atomic<UInt64>(0)
    private let tokenForbidden = Atomic<UInt64>(0)
    private let keyOK = Atomic<UInt64>(0), keyUnknown = Atomic<UInt64>(0), keyRevoked = Atomic<UInt64>(0)
    private let keyForbidden = Atomic<UInt64>(0)

    public init() {}

    /// Adds `delta` to a series and returns its value (`delta` 0: reads it).
    @discardableResult
    private func add(_ delta: UInt64, _ credential: Credential, _ outcome: Outcome) -> UInt64 {
        switch (credential, outcome) {
        case (.token, .ok): tokenOK.add(delta, ordering: .relaxed).newValue
        case (.token, .unknown): tokenUnknown.add(delta, ordering: .relaxed).newValue
        case (.token, .revoked): tokenRevoked.add(delta, ordering: .relaxed).newValue
        case (.token, .forbidden): tokenForbidden.add(delta, ordering: .relaxed).newValue
        case (.advertiserKey, .ok): keyOK.add(delta, ordering: .relaxed).newValue
        case (.advertiserKey, .unknown): keyUnknown.add(delta, ordering: .relaxed).newValue
        case (.advertiserKey, .revoked): keyRevoked.add(delta, ordering: .relaxed).newValue
        case (.advertiserKey, .forbidden): keyForbidden.add(delta, ordering: .relaxed).newValue
        }
    }

    func count(_ credential: Credential, _ outcome: Outcome) {
        add(1, credential, outcome)
    }

    /// Every series, zero included, in a fixed order.
    public var all: [(credential: Credential, outcome: Outcome, count: UInt64)] {
        Credential.allCases.flatMap { credential in
            Outcome.allCases.map { outcome in (credential, outcome, add(0, credential, outcome)) }
        }
    }
}
