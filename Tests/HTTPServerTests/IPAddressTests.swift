import HTTPServer
import Testing

/// Addresses in their text forms; the expected numbers are written out by hand.
@Suite(.timeLimit(.minutes(3))) struct IPAddressTests {
    @Test(arguments: [
        ("192.0.2.1", "::ffff:c000:201"), ("0.0.0.0", "::ffff:0:0"), ("255.255.255.255", "::ffff:ffff:ffff"),
        ("2001:db8::1", "2001:db8::1"), ("::1", "::1"), ("::", "::"), ("::ffff:192.0.2.1", "::ffff:c000:201"),
        ("2001:DB8:0:0:8:800:200C:417A", "2001:db8::8:800:200c:417a"), ("fe80::", "fe80::"),
    ])
    func parses(_ text: String, _ sameAs: String) throws {
        let address = try #require(IPAddress(text))
        let other = try #require(IPAddress(sameAs))
        #expect(address == other)
    }

    @Test(arguments: ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4:80", "[::1]",
                      "::1::", "1:2:3:4:5:6:7:8:9", "12345::", "g::1", "1.2.3.4/8", "unknown", ":1", "1:"])
    func refuses(_ text: String) {
        #expect(IPAddress(text) == nil, "\(text)")
    }

    @Test func ipv4AndItsMappedFormAreOneAddressAndPrintAsIPv4() throws {
        let v4 = try #require(IPAddress("203.0.113.9"))
        #expect(v4.isIPv4)
        #expect(v4 == IPAddress(ipv4: 0xCB00_7109))
        #expect(v4.value == 0xFFFF_CB00_7109)
        #expect(v4.description == "203.0.113.9")
        #expect(try #require(IPAddress("::ffff:203.0.113.9")).description == "203.0.113.9")
        #expect(try #require(IPAddress("2001:db8:0:0:0:0:0:1")).description == "2001:db8::1")
        #expect(try #require(IPAddress("2001:db8::")).isIPv4 == false)
    }
}
