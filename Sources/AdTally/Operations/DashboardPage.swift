import HTTP

/// The dashboard (docs/DASHBOARD.md): one public HTML page, its script, style sheet and icon. They hold
/// no data: the page asks for a token with the `reports` scope and reads the JSON reports API.
///
/// The files are in `Operations/Assets/` and embedded in the binary by SwiftPM's `.embedInCode` rule
/// (`PackageResources`), so the binary serves them with nothing beside it. Each answer carries:
///
/// - a `Content-Security-Policy` that allows scripts, styles, images, fonts and requests from
///   AdTally's own origin only, no inline script or style, no framing, no form submission (every form
///   is handled by the script; without it, a form must not put the token into a URL);
/// - `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and for older browsers
///   `X-Frame-Options: DENY`; `Cross-Origin-Resource-Policy: same-origin`, so no other site loads them;
/// - `Cache-Control: no-cache` with a strong `ETag`: a browser may keep them but asks again on every
///   load, and gets `304` while they are unchanged. They change only with a new binary, and then the
///   page and its script must change together: an expiry time would let a cached old script run
///   against a new page for as long as it lasts, and versioned file names would mean rewriting the
///   page for a few tens of kilobytes.
///
/// This type only answers "what is at this path"; the routes (`GET /dashboard` and the `paths`) are
/// registered by the service.
public struct DashboardPage: Sendable {
    /// One file as served.
    public struct Asset: Sendable {
        /// The request path, `/dashboard` or `/dashboard/<file>`.
        public let path: String
        public let contentType: String
        public let bytes: [UInt8]
        /// A strong entity tag, quoted: a 64-bit FNV-1a hash of the bytes.
        public let etag: String

        init(path: String, contentType: String, bytes: [UInt8]) {
            self.path = path
            self.contentType = contentType
            self.bytes = bytes
            let hash = String(FNV1a64.hash(bytes), radix: 16)
            self.etag = "\"" + String(repeating: "0", count: 16 - hash.count) + hash + "\""
        }

        /// Every header of the answer: `Content-Type`, the security headers, `Cache-Control`, `ETag`.
        public var headers: HTTPHeaders {
            var headers = HTTPHeaders([("Content-Type", contentType)])
            for (name, value) in DashboardPage.securityHeaders { headers.add(name: name, value: value) }
            headers.add(name: "Cache-Control", value: DashboardPage.cacheControl)
            headers.add(name: "ETag", value: etag)
            return headers
        }

        /// `200` with the bytes, or `304` without them when `ifNoneMatch` (the request's
        /// `If-None-Match`) names this version.
        public func response(ifNoneMatch: String? = nil) -> HTTPResponse {
            if let ifNoneMatch, DashboardPage.matches(ifNoneMatch, etag: etag) {
                return HTTPResponse(status: HTTPStatus(code: 304), headers: headers)
            }
            return HTTPResponse(status: .ok, headers: headers, body: bytes)
        }
    }

    /// The page's path. The assets are beside it, under `/dashboard/`, and the page names them by
    /// relative URLs (`dashboard/dashboard.js`), so it also works behind a proxy that adds a prefix.
    public static let pagePath = "/dashboard"

    /// Only the same origin, no inline script or style (so no `'unsafe-inline'`), nothing framed.
    /// CSV downloads are `blob:` URLs opened by an `<a download>`: a download, which no directive governs.
    public static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// Sent with every asset, the page first.
    public static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]

    public static let cacheControl = "no-cache"

    /// Every file, by path.
    public static let assets: [String: Asset] = {
        let list = [
            Asset(path: pagePath, contentType: "text/html; charset=utf-8", bytes: PackageResources.dashboard_html),
            Asset(path: "/dashboard/dashboard.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.dashboard_js),
            Asset(path: "/dashboard/dashboard.css", contentType: "text/css; charset=utf-8", bytes: PackageResources.dashboard_css),
            Asset(path: "/dashboard/favicon.svg", contentType: "image/svg+xml", bytes: PackageResources.favicon_svg),
        ]
        return Dictionary(uniqueKeysWithValues: list.map { ($0.path, $0) })
    }()

    /// The paths to route, the page first.
    public static var paths: [String] {
        [pagePath] + assets.keys.filter { $0 != pagePath }.sorted()
    }

    /// The file at `path` (the request path without its query), or nil.
    public static func asset(for path: String) -> Asset? {
        assets[path]
    }

    /// Whether an `If-None-Match` value names `etag`: `*`, or a list of tags, weak ones compared
    /// weakly (RFC 9110 section 13.1.2).
    static func matches(_ ifNoneMatch: String, etag: String) -> Bool {
        for candidate in ifNoneMatch.split(separator: ",") {
            var tag = candidate.trimmingSpaces()
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag == etag { return true }
        }
        return false
    }
}
