import Foundation

/// Where the tracker keeps its queue.
public enum TrackerStorage: Sendable, Equatable {
    /// A journal in this directory (created if missing), private to one tracker: events survive the
    /// app being killed once written, and are sent after the next start. In an iOS app, a folder in
    /// Application Support (not Caches, which the system may empty).
    case directory(URL)
    /// Memory only: events are lost when the process ends. For tests, previews and extensions that
    /// cannot write.
    case memory
}
