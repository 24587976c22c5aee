/// The time zone a report's buckets and final rows are in (`tz`, API.md section 3): an IANA name in
/// its form (letters, digits and `/ _ - +`, at most 64 bytes), `UTC` unless the query says. Whether
/// the server knows it is `KnownZones`'s to say, from PostgreSQL's list.
public struct ZoneName: Hashable, Sendable, CustomStringConvertible {
    /// The name as the query gave it (names are case-sensitive).
    public let name: String

    /// UTC, every report's zone unless `tz` says otherwise: its buckets are whole UTC hours and
    /// days, and its times are written with `Z`.
    public static let utc = ZoneName(checked: "UTC")

    /// A name in the form of an IANA zone name; nil otherwise.
    public init?(_ name: String) {
        let wellFormed = !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
        }
        guard wellFormed else { return nil }
        self.name = name
    }

    private init(checked name: String) {
        self.name = name
    }

    public var isUTC: Bool { self == .utc }

    public var description: String { name }
}
