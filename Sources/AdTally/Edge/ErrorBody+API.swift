import HTTPServer
import JSON
import Postgres

extension ErrorBody {
    /// The contract's error body, `{"error":{"code":…,"message":…,"field":…}}` (`field` omitted
    /// when nil), for every error answer: the server's own (`404`, `405`, `408`, `413`, `431`, …)
    /// and the product's. A database that cannot be used (`PostgresError`, from wherever a handler
    /// met it) means `503 unavailable`: the one place that says so.
    public static let api = ErrorBody(contentType: "application/json", render: { code, message, field in
        var writer = JSONWriter(reservingCapacity: 64 + message.utf8.count)
        writer.beginObject()
        writer.key("error")
        writer.beginObject()
        writer.key("code"); writer.string(code)
        writer.key("message"); writer.string(message)
        if let field { writer.key("field"); writer.string(field) }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }, meaning: { error in
        if let error = error as? PostgresError, error.meansUnavailable { return APIError.unavailable() }
        if let error = error as? any Unavailability { return APIError.unavailable(error.message) }
        return nil
    })
}

/// An error of a slice meaning that the request could not get to the database in time (a queue
/// that waited too long, a server shutting down) and nothing of it was stored: `503`.
public protocol Unavailability: Error {
    /// For the client: what happened, and that the same request may be sent again.
    var message: String { get }
}

extension PostgresError {
    /// The database could not be used for the request (unreachable, gone mid-way, not the
    /// primary, no connection free in time, shutting down, a standby's recovery conflict): nothing
    /// was stored, and the same request may be sent again.
    var meansUnavailable: Bool { isConnectionGone || isRecoveryConflict }
}
