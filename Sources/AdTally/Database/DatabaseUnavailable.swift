import HTTP
import HTTPServer
import Postgres

/// A database that cannot be used, as the client sees it: `503` with `Retry-After` (the request
/// stored nothing and may be retried), made in one place for every route that meets one.
enum DatabaseUnavailable {
    static func error() -> HTTPError {
        HTTPError(HTTPStatus(code: 503), code: "unavailable",
                  message: "The database is unavailable; nothing was stored. Retry the same request.",
                  headers: [("Retry-After", "1")])
    }

    /// Database trouble as the client should see it: `503` when the database cannot be used (the
    /// request stored nothing and may be retried), the error itself otherwise (a `500`, logged).
    static func mapping<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError where error.isConnectionGone {
            throw Self.error()
        }
    }
}
