@testable import AdTally
import Foundation
import HTTP
import Testing

/// The dashboard's files as the binary serves them (docs/DASHBOARD.md): their types and security
/// headers, and that the page can run under its own Content-Security-Policy: nothing from another
/// origin, no inline script or style. No database.
@Suite(.timeLimit(.minutes(3)))
struct DashboardPageTests {
    static let expectedTypes = [
        "/dashboard": "text/html; charset=utf-8",
        "/dashboard/dashboard.js": "text/javascript; charset=utf-8",
        "/dashboard/dashboard.css": "text/css; charset=utf-8",
        "/dashboard/favicon.svg": "image/svg+xml",
    ]

    static func text(_ path: String) throws -> String {
        let asset = try #require(DashboardPage.asset(for: path))
        return String(decoding: asset.bytes, as: UTF8.self)
    }

    static var html: String { get throws { try text("/dashboard") } }

    /// The values of every `name="..."` attribute in `html`.
    static func attributeValues(_ name: String, in html: String) -> [String] {
        let pattern = try! Regex("\\s\(name)\\s*=\\s*\"([^\"]*)\"").ignoresCase()
        return html.matches(of: pattern).compactMap { $0.output[1].substring.map(String.init) }
    }

    @Test func everyPathAnswersItsFileWithItsType() throws {
        #expect(Set(DashboardPage.assets.keys) == Set(Self.expectedTypes.keys))
        #expect(DashboardPage.paths.first == "/dashboard")
        #expect(Set(DashboardPage.paths) == Set(Self.expectedTypes.keys))
        for (path, type) in Self.expectedTypes {
            let asset = try #require(DashboardPage.asset(for: path))
            #expect(asset.contentType == type, "\(path)")
            #expect(!asset.bytes.isEmpty, "\(path)")
            let response = asset.response()
            #expect(response.status.code == 200)
            #expect(response.headers["Content-Type"] == type)
            guard case .bytes(let body) = response.body else {
                Issue.record("\(path): not a plain body")
                continue
            }
            #expect(body == asset.bytes)
        }
        for path in ["/dashboard/", "/dashboard/../dashboard", "/dashboard/dashboard.js.map", "/dashboard.js", "/", "/Dashboard"] {
            #expect(DashboardPage.asset(for: path) == nil, "\(path)")
        }
    }

    @Test func everyAnswerCarriesTheSecurityHeaders() throws {
        for path in DashboardPage.paths {
            let headers = try #require(DashboardPage.asset(for: path)).response().headers
            let csp = try #require(headers["Content-Security-Policy"], "\(path)")
            var directives: [String: [String]] = [:]
            for directive in csp.split(separator: ";") {
                let words = directive.split(separator: " ").map(String.init)
                guard let name = words.first else { continue }
                directives[name] = Array(words.dropFirst())
            }
            #expect(directives["default-src"] == ["'none'"])
            for name in ["script-src", "style-src", "connect-src", "img-src", "font-src"] {
                #expect(directives[name] == ["'self'"], "\(name) allows only the same origin")
            }
            #expect(directives["frame-ancestors"] == ["'none'"])
            #expect(directives["base-uri"] == ["'none'"])
            #expect(directives["form-action"] == ["'none'"])
            for word in ["unsafe-inline", "unsafe-eval", "unsafe-hashes", "http", "*", "data:", "blob:"] {
                #expect(!csp.contains(word), "the policy must not allow \(word)")
            }
            #expect(headers["X-Content-Type-Options"] == "nosniff")
            #expect(headers["Referrer-Policy"] == "no-referrer")
            #expect(headers["X-Frame-Options"] == "DENY")
            #expect(headers["Cross-Origin-Resource-Policy"] == "same-origin")
            #expect(headers["Cache-Control"] == "no-cache")
            let etag = try #require(headers["ETag"])
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count == 18)
        }
    }

    @Test func theETagNamesTheVersionAndAMatchAnswers304() throws {
        let asset = try #require(DashboardPage.asset(for: "/dashboard/dashboard.js"))
        let other = try #require(DashboardPage.asset(for: "/dashboard/dashboard.css"))
        #expect(asset.etag != other.etag)
        #expect(asset.etag == DashboardPage.Asset(path: asset.path, contentType: asset.contentType, bytes: asset.bytes).etag)
        for header in [asset.etag, "W/\(asset.etag)", "\"0000000000000000\", \(asset.etag)", "*"] {
            let response = asset.response(ifNoneMatch: header)
            #expect(response.status.code == 304, "\(header)")
            #expect(response.headers["ETag"] == asset.etag)
            #expect(response.headers["Content-Security-Policy"] == DashboardPage.contentSecurityPolicy)
            if case .bytes(let body) = response.body { #expect(body.isEmpty) }
        }
        for header in [other.etag, "\"\"", "", asset.etag.dropLast() + "x\""] {
            #expect(asset.response(ifNoneMatch: String(header)).status.code == 200, "\(header)")
        }
    }

    /// Every URL in the page is a path on AdTally: relative (`dashboard/dashboard.js`, resolved
    /// against `/dashboard`) or absolute-path; none has a scheme or starts with `//`; each is a file
    /// this type serves.
    @Test func thePageReferencesOnlyItsOwnFiles() throws {
        let html = try Self.html
        let urls = Self.attributeValues("src", in: html) + Self.attributeValues("href", in: html)
            + Self.attributeValues("action", in: html)
        #expect(urls.count >= 4, "the page names its script, style sheet and icon")
        for url in urls {
            #expect(!url.contains(":"), "\(url): no scheme (http:, https:, data:, javascript:)")
            #expect(!url.hasPrefix("//"), "\(url): no network-path reference")
            if url.hasPrefix("#") { continue }
            let path = url.hasPrefix("/") ? url : "/" + url
            #expect(DashboardPage.asset(for: path) != nil, "\(url) is not served")
        }
        for text in [html, try Self.text("/dashboard/dashboard.css")] {
            #expect(!text.contains("http:") && !text.contains("https:") && !text.contains("//cdn"), "no absolute URL")
            #expect(!text.contains("@import"), "nothing imported")
        }
        // The style sheet's url() are fragment references to the page's own SVG patterns.
        let css = try Self.text("/dashboard/dashboard.css")
        for match in css.matches(of: /url\(([^)]*)\)/) {
            #expect(match.output.1.hasPrefix("#"), "\(match.output.0)")
        }
        #expect(html.contains("<script src=\"dashboard/dashboard.js\" defer></script>"))
        #expect(html.contains("<link rel=\"stylesheet\" href=\"dashboard/dashboard.css\">"))
        #expect(html.contains("<link rel=\"icon\" type=\"image/svg+xml\" href=\"dashboard/favicon.svg\">"))
    }

    /// What the policy would refuse must not be there: the page would break in the browser.
    @Test func thePageHasNoInlineScriptOrStyle() throws {
        let html = try Self.html
        let scripts = html.matches(of: try Regex("<script\\b([^>]*)>(.*?)</script>").dotMatchesNewlines().ignoresCase())
        #expect(scripts.count == 1)
        for script in scripts {
            let attributes = script.output[1].substring.map(String.init) ?? ""
            let body = script.output[2].substring.map(String.init) ?? ""
            #expect(attributes.contains("src="), "every script is a file")
            #expect(body.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "no inline script")
        }
        #expect(html.firstMatch(of: try Regex("<style\\b").ignoresCase()) == nil, "no <style> element")
        #expect(html.firstMatch(of: try Regex("\\sstyle\\s*=").ignoresCase()) == nil, "no style= attribute")
        #expect(html.firstMatch(of: try Regex("\\son[a-z]+\\s*=").ignoresCase()) == nil, "no onclick= and the like")
        #expect(!html.lowercased().contains("javascript:"))
    }

    /// The token form cannot leak the token into a URL: its field has no name, and the policy
    /// forbids form submission (the script handles every form).
    @Test func theTokenFieldIsNeverSubmittedByTheBrowser() throws {
        let html = try Self.html
        let field = try #require(html.firstMatch(of: /<input id="token"[^>]*>/))
        #expect(!field.output.contains("name="))
        #expect(field.output.contains("type=\"password\""))
        #expect(field.output.contains("autocomplete=\"off\""))
        #expect(DashboardPage.contentSecurityPolicy.contains("form-action 'none'"))
    }

    /// The script keeps the token for the tab only, calls only AdTally, and builds no markup from text.
    @Test func theScriptKeepsToItsOrigin() throws {
        let js = try Self.text("/dashboard/dashboard.js")
        #expect(js.contains("sessionStorage"))
        #expect(!js.contains("localStorage"), "the token is kept for the tab only")
        #expect(!js.contains("document.cookie"))
        for word in ["eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "import("] {
            #expect(!js.contains(word), "\(word)")
        }
        // The one absolute URL is the SVG namespace, an identifier that is never fetched.
        let absolute = js.matches(of: /https?:\/\/[^'"\s]*/).map { String($0.output) }
        #expect(absolute == ["http://www.w3.org/2000/svg"])
        #expect(js.contains("apiGet('v1/reports/ads'"), "the reports API by a relative path")
        #expect(js.contains("apiGet('v1/reports/credits'"), "the credits report (API 1.4) by a relative path")
        #expect(js.contains("'Bearer '"))
        #expect(js.contains("encodeURIComponent"), "query values are percent-encoded (+ as %2B)")
    }

    /// The binary serves the files as they are in the source tree (a stale build would not).
    @Test func theEmbeddedFilesAreTheSourceFiles() throws {
        let folder = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/AdTally/Operations/Assets")
        for (path, file) in [("/dashboard", "dashboard.html"), ("/dashboard/dashboard.js", "dashboard.js"),
                             ("/dashboard/dashboard.css", "dashboard.css"), ("/dashboard/favicon.svg", "favicon.svg")] {
            let onDisk = try Data(contentsOf: folder.appendingPathComponent(file))
            #expect(try #require(DashboardPage.asset(for: path)).bytes == Array(onDisk), "\(file)")
        }
    }
}
