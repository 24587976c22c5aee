import HTTP
import HTTPServer
import JSON
import Postgres
import Runtime

/// Advertiser keys (API.md section 13), for the publisher's admin (a token with every scope):
/// `POST` and `GET /v1/advertisers/{advertiser_id}/keys`, `DELETE .../keys/{key_id}`. A key made
/// or revoked here is taught to this process's keyring at once; the others learn it from the
/// database within `KeyringSync`'s interval. Making and revoking a key, and every refusal of one
/// (`Edge`), are logged with its `key_id` and advertiser, never the key.
public struct KeyRoutes: Sendable {
    let pool: PostgresPool
    let keyring: AdvertiserKeyring
    let logger: Logger
    var store = KeyStore()

    public init(pool: PostgresPool, keyring: AdvertiserKeyring, logger: Logger) {
        self.pool = pool
        self.keyring = keyring
        self.logger = logger
    }

    static let keysPattern = "/v1/advertisers/{advertiser_id}/keys"
    static let keyPattern = "/v1/advertisers/{advertiser_id}/keys/{key_id}"

    public func register(on edge: inout Edge) {
        edge.add(.post, Self.keysPattern, .admin(jsonBody: true)) { request in
            guard let advertiserID = request.path["advertiser_id"] else { throw APIError.invalidPath("advertiser_id") }
            return .onWorker { context in try create(advertiserID, body: context.request.body) }
        }
        edge.add(.get, Self.keysPattern, .admin()) { request in
            guard let advertiserID = request.path["advertiser_id"] else { throw APIError.invalidPath("advertiser_id") }
            return .onWorker { _ in try list(advertiserID) }
        }
        edge.add(.delete, Self.keyPattern, .admin()) { request in
            guard let advertiserID = request.path["advertiser_id"] else { throw APIError.invalidPath("advertiser_id") }
            guard let keyID = request.path["key_id"] else { throw APIError.invalidPath("key_id") }
            return .onWorker { _ in try revoke(advertiserID, keyID) }
        }
    }

    func create(_ advertiserID: String, body: [UInt8]) throws -> HTTPResponse {
        let request: KeyRequest
        do {
            request = try KeyRequest.decode(body: body)
        } catch {
            switch error {
            case .malformedJSON(let message): throw APIError(.malformedJSON, message)
            case .invalid(let field, let message): throw APIError(.invalidKeyRequest, message, field: field)
            }
        }
        let creation = try pool.withConnection { try store.create(advertiserID: advertiserID, request, on: $0) }
        guard case .created(let created) = creation else {
            throw APIError(.tooManyKeys, "Advertiser \(advertiserID) has \(KeyStore.maximumActiveKeys) keys that are not revoked; revoke one first.")
        }
        keyring.learn(digest: created.digest, AdvertiserKeyring.Entry(key: created.key.principal, revoked: false))
        logger.info("advertiser key created", [("key_id", .string(created.key.keyID)), ("advertiser_id", .string(advertiserID)),
                                               ("scopes", .string(created.key.scopes.names.joined(separator: ",")))])
        var writer = JSONWriter(reservingCapacity: 512)
        Self.write(created.key, secret: created.secret, to: &writer)
        return .json(.created, writer.bytes)
    }

    func list(_ advertiserID: String) throws -> HTTPResponse {
        let keys = try pool.withConnection { try store.list(advertiserID: advertiserID, on: $0) }
        var writer = JSONWriter(reservingCapacity: 128 + keys.count * 320)
        writer.beginObject()
        writer.key("advertiser_id"); writer.string(advertiserID)
        writer.key("keys")
        writer.beginArray()
        for key in keys { Self.write(key, secret: nil, to: &writer) }
        writer.endArray()
        writer.endObject()
        return .json(.ok, writer.bytes)
    }

    func revoke(_ advertiserID: String, _ keyID: String) throws -> HTTPResponse {
        guard let (key, digest) = try pool.withConnection({ try store.revoke(advertiserID: advertiserID, keyID: keyID, on: $0) }) else {
            throw APIError.notFound("Advertiser \(advertiserID) has no key \(keyID).")
        }
        keyring.learn(digest: digest, AdvertiserKeyring.Entry(key: key.principal, revoked: true))
        logger.info("advertiser key revoked", [("key_id", .string(key.keyID)), ("advertiser_id", .string(advertiserID)),
                                               ("revoked_at", .string(key.revokedAt?.rfc3339 ?? ""))])
        var writer = JSONWriter(reservingCapacity: 512)
        Self.write(key, secret: nil, to: &writer)
        return .json(.ok, writer.bytes)
    }

    /// A key's entry, members in the contract's order; `key` only in the answer that made it.
    static func write(_ key: KeyStore.Key, secret: String?, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("key_id"); writer.string(key.keyID)
        writer.key("advertiser_id"); writer.string(key.advertiserID)
        writer.key("name"); writer.string(key.name)
        writer.key("scopes")
        writer.beginArray()
        for name in key.scopes.names { writer.string(name) }
        writer.endArray()
        writer.key("created_at"); writer.string(key.createdAt.rfc3339)
        writer.key("last_used_at"); writer.string(key.lastUsedAt?.rfc3339)
        writer.key("revoked_at"); writer.string(key.revokedAt?.rfc3339)
        if let secret { writer.key("key"); writer.string(secret) }
        writer.endObject()
    }
}
