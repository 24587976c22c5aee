@testable import AdTally
import Testing

@Suite(.timeLimit(.minutes(3))) struct LandingURLTests {
    static let longestAccepted = "https://a.example/" + String(repeating: "x", count: 2048 - 18)

    @Test(arguments: [
        "https://acme.example/landing?c=9",
        "https://globex.example/",
        "HTTPS://A.EXAMPLE/x#frag",
        "HtTpS://a.example",
        "https://a.example",
        "https://a.example?x=1",
        "https://a.example#top",
        "https://a.example:443/x",
        "https://a.example:1",
        "https://a.example:65535/",
        "https://[2001:db8::1]/x",
        "https://[::1]:8443/",
        "https://xn--bcher-kva.example/",
        "https://a.example/p%20q?r=%C3%A9",
        "https://a.example/path@x",
        "https://a.example/?q=a@b",
        "https://a-b_c~d.example/",
        longestAccepted,
    ])
    func accepts(_ url: String) {
        #expect(LandingURL.isAcceptable(url))
    }

    @Test func longestAcceptedIsExactly2048Bytes() {
        #expect(Self.longestAccepted.utf8.count == 2048)
        #expect(!LandingURL.isAcceptable(Self.longestAccepted + "x"))
    }

    @Test(arguments: [
        "", "tel:+15551234567", "http://a.example/", "javascript:alert(1)", "myapp://open/ad",
        "ftp://a.example/", "httpss://a.example/", "https//a.example/",
        "https:///x", "https:x", "https:/x", "https://", "https://?q", "https://#f",
        "https://user@a.example/", "https://user:pw@a.example/", "https://@a.example/",
        "https://a.example\\@evil.example/", "https://evil.example\\.a.example/",
        "https://a.example/ x", " https://a.example/", "https://a.example/\tx", "https://a.example/\u{7F}",
        "https://a.example/\n", "https://bücher.example/", "https://a.example/é",
        "https://a.example:/", "https://a.example:0/", "https://a.example:65536/", "https://a.example:443x/",
        "https://a.example:-1/", "https://a.example:000443/", "https://:443/", "https://a.example:443:1/",
        "https://a%zz.example/", "https://a%2.example/", "https://[::1/", "https://[::1]x/", "https://[]/",
        "https://[example.com]/", "https://a<b.example/", "https://a\"b.example/",
    ])
    func refuses(_ url: String) {
        #expect(!LandingURL.isAcceptable(url))
    }
}
