/// The size limits the parser enforces, as parameters so that a server (and a test) can tighten them.
/// Defaults are those of API.md section 5.
public struct ParserLimits: Sendable, Equatable {
    /// Request line plus header lines (and the blank line) beyond this: `431`.
    public var maxHeadBytes: Int
    /// Request target beyond this: `414`.
    public var maxTargetBytes: Int
    /// More header fields than this: `431`.
    public var maxHeaderCount: Int
    /// Decoded body beyond this: `413`.
    public var maxBodyBytes: Int

    /// Limits with API.md's defaults.
    public init(maxHeadBytes: Int = 16 * 1024, maxTargetBytes: Int = 8 * 1024,
                maxHeaderCount: Int = 100, maxBodyBytes: Int = 1024 * 1024) {
        self.maxHeadBytes = maxHeadBytes
        self.maxTargetBytes = maxTargetBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxBodyBytes = maxBodyBytes
    }
}
