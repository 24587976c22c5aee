/// The two kinds of event the contract knows; the raw values are the wire spelling.
public enum EventType: String, Sendable, Hashable, CaseIterable {
    case impression
    case click
}
