import Runtime

extension Logger {
    /// A logger whose lines go nowhere (errors only are even formatted), for tests that watch
    /// something else.
    public static let discarding = Logger(level: .error) { _ in }
}
