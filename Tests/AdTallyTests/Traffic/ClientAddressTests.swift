@testable import AdTally
import AdTallyApp
import HTTP
import HTTPServer
import Testing

/// Address ranges and the client address of API.md ("The client address").
@Suite(.timeLimit(.minutes(3))) struct ClientAddressTests {
    static func address(_ text: String) -> IPAddress {
        // The tests' own literals parse; a typo fails the test that uses it.
        IPAddress(text) ?? IPAddress(value: 0)
    }

    @Test func rangesHoldTheirAddressesIPv4AndIPv6() throws {
        let ranges = try AddressRanges.parse(list: "10.0.0.0/8, 192.0.2.1,2001:db8::/32, ,203.0.113.128/25")
        #expect(ranges.entryCount == 4)
        for inside in ["10.0.0.0", "10.255.255.255", "192.0.2.1", "2001:db8::", "2001:db8:ffff:ffff::1", "203.0.113.200",
                       "::ffff:10.1.2.3"] {
            #expect(ranges.contains(Self.address(inside)), "\(inside)")
        }
        for outside in ["9.255.255.255", "11.0.0.0", "192.0.2.2", "2001:db9::", "203.0.113.127", "::1"] {
            #expect(!ranges.contains(Self.address(outside)), "\(outside)")
        }
    }

    @Test func hostBitsPastThePrefixAreIgnoredAndPrefixesAreChecked() throws {
        let ranges = try AddressRanges.parse(list: "10.1.2.3/8,::/0")
        #expect(ranges.contains(Self.address("10.200.0.1")))
        #expect(ranges.contains(Self.address("fe80::1")))
        for bad in ["10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8", "host.example", "10.0.0.0 /8"] {
            #expect(throws: AddressRanges.BadEntry.self, "\(bad)") { try AddressRanges.parse(list: bad) }
        }
    }

    @Test func aFileNamesItsFirstBadLine() throws {
        let good = try AddressRanges.parse(lines: "# data centres\n\n198.51.100.0/24   # a comment\n2001:db8::/48\n")
        #expect(good.entryCount == 2 && good.contains(Self.address("198.51.100.7")))
        let error = #expect(throws: AddressRanges.BadEntry.self) { try AddressRanges.parse(lines: "10.0.0.0/8\n\nnot-an-address\n") }
        #expect(error?.line == 3)
        #expect(error?.text == "not-an-address")
    }

    @Test func aListOfTenThousandRangesIsOneBinarySearch() throws {
        var entries: [String] = []
        for a in 0..<100 { for b in 0..<100 { entries.append("\(a + 1).\(b).0.0/16") } }
        let ranges = try AddressRanges.parse(list: entries.joined(separator: ","))
        #expect(ranges.entryCount == 10_000)
        #expect(ranges.contains(Self.address("57.33.1.2")))
        #expect(!ranges.contains(Self.address("101.0.0.1")))
    }

    static func headers(_ forwarded: [String]) -> HTTPHeaders {
        HTTPHeaders(forwarded.map { ("X-Forwarded-For", $0) })
    }

    @Test func anUntrustedPeerIsTheClientWhateverItsHeaderSays() throws {
        let resolver = ClientAddressResolver(trusted: try AddressRanges.parse(list: "10.0.0.0/8"))
        let peer = Self.address("198.51.100.5")
        #expect(resolver.client(peer: peer, headers: Self.headers(["203.0.113.1"])) == peer)
        let noTrust = ClientAddressResolver(trusted: AddressRanges())
        #expect(noTrust.client(peer: peer, headers: Self.headers(["203.0.113.1"])) == peer)
    }

    @Test func aTrustedPeerNamesTheRightMostUntrustedAddressOfEveryHeader() throws {
        let resolver = ClientAddressResolver(trusted: try AddressRanges.parse(list: "10.0.0.0/8, 2001:db8::/32"))
        let proxy = Self.address("10.0.0.2")
        #expect(resolver.client(peer: proxy, headers: Self.headers(["203.0.113.1"])) == Self.address("203.0.113.1"))
        // A client that writes its own header first cannot choose its address: the right-most untrusted one counts.
        #expect(resolver.client(peer: proxy, headers: Self.headers(["1.1.1.1, 203.0.113.1, 10.0.0.9"])) == Self.address("203.0.113.1"))
        // Several headers are one list, in order.
        #expect(resolver.client(peer: proxy, headers: Self.headers(["1.1.1.1", "203.0.113.7 , 10.0.0.9"])) == Self.address("203.0.113.7"))
        // Optional whitespace is spaces and tabs (RFC 9110); anything else in an element makes it no address.
        #expect(resolver.client(peer: proxy, headers: Self.headers(["\t 198.51.100.4\t,\t10.0.0.9 "])) == Self.address("198.51.100.4"))
        #expect(resolver.client(peer: proxy, headers: Self.headers(["198.51.100.4 x, 10.0.0.9"])) == proxy)
        // Every address trusted: the left-most.
        #expect(resolver.client(peer: proxy, headers: Self.headers(["10.0.0.7, 10.0.0.9"])) == Self.address("10.0.0.7"))
        // IPv6, and an IPv4-mapped peer counting as IPv4.
        #expect(resolver.client(peer: Self.address("2001:db8::1"), headers: Self.headers(["2001:db9::5"])) == Self.address("2001:db9::5"))
        #expect(resolver.client(peer: Self.address("::ffff:10.0.0.2"), headers: Self.headers(["198.51.100.1"])) == Self.address("198.51.100.1"))
    }

    @Test func aMissingOrMalformedHeaderFromATrustedPeerFallsBackToThePeer() throws {
        let resolver = ClientAddressResolver(trusted: try AddressRanges.parse(list: "10.0.0.0/8"))
        let proxy = Self.address("10.0.0.2")
        #expect(resolver.client(peer: proxy, headers: HTTPHeaders()) == proxy)
        for malformed in ["unknown", "203.0.113.1:4711", "", "203.0.113.1,,10.0.0.3", "[2001:db8::1]"] {
            #expect(resolver.client(peer: proxy, headers: Self.headers([malformed])) == proxy, "\(malformed)")
        }
        #expect(resolver.client(peer: nil, headers: Self.headers(["203.0.113.1"])) == nil)
    }

    @Test func theSettingTakesAddressesAndRangesAndNamesABadOne() throws {
        let configuration = try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_TRUSTED_PROXIES": " 10.0.0.0/8 , ::1 "])
        #expect(configuration.trustedProxies.contains(Self.address("10.3.3.3")))
        #expect(configuration.trustedProxies.contains(Self.address("::1")))
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"])
        }
        #expect(error?.variable == "ADTALLY_TRUSTED_PROXIES")
        #expect(error?.message.contains("proxy.internal") == true)
    }
}
