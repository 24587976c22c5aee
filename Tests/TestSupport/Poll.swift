import Foundation

/// Polls `probe` every 50 ms until it returns a value or `seconds` pass (nil then): how the tests
/// wait for a condition with a bound instead of sleeping a fixed time.
public func poll<T>(seconds: Double, _ probe: () -> T?) -> T? {
    let deadline = Date() + seconds
    while Date() < deadline {
        if let value = probe() { return value }
        usleep(50_000)
    }
    return nil
}
