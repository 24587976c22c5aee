import HTTP
import HTTPServer

/// The head checks of API.md's refusal order (auth, then path, then media type), run before the
/// body is read so that they win over `413`.
struct RequestChecks: Sendable {
    /// The admin token, nil when none is configured (every admin request is refused).
    let adminToken: [UInt8]?

    /// `401` unless `Authorization: Bearer <token>` matches, compared in constant time.
    func requireAdmin(_ request: HTTPRequest) throws {
        guard let expected = adminToken,
              let header = request.headers["Authorization"] else { throw APIError.unauthorized() }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw APIError.unauthorized() }
        guard Self.constantTimeEquals(Array(parts[1].utf8), expected) else { throw APIError.unauthorized() }
    }

    /// Compares without an early exit, so the time taken does not say how much of a guess was right.
    /// The length difference is folded in rather than returned early; the length itself is not secret.
    static func constantTimeEquals(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt64(given.count ^ expected.count)
        for index in 0..<expected.count {
            let byte = index < given.count ? given[index] : 0
            difference |= UInt64(byte ^ expected[index])
        }
        return difference == 0
    }

    /// `400 invalid_path` unless the named path parameter is a well-formed identifier.
    func requireIdentifier(_ context: RequestContext, _ name: String) throws -> String {
        guard let value = context.parameter(name), Identifier.isWellFormed(value) else { throw APIError.invalidPath(name) }
        return value
    }

    /// `415` unless the request says `Content-Type: application/json`, with charset utf-8 if any.
    func requireJSON(_ request: HTTPRequest) throws {
        guard let header = request.headers["Content-Type"] else { throw APIError.unsupportedMediaType() }
        let parts = header.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingSpaces().lowercased() }
        guard parts.first == "application/json" else { throw APIError.unsupportedMediaType() }
        for parameter in parts.dropFirst() where !parameter.isEmpty {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            guard pair.count == 2 else { throw APIError.unsupportedMediaType() }
            if pair[0] == "charset" {
                let value = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2
                    ? String(pair[1].dropFirst().dropLast()) : pair[1]
                guard value == "utf-8" else { throw APIError.unsupportedMediaType() }
            }
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars = scalars.dropFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
