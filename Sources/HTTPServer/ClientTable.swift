/// What a process remembers of one client address for its limits (API.md section 6): the events
/// bucket, the failed admin auth of the current UTC minute, and the minute it was last warned of.
struct ClientState: Sendable, Equatable {
    /// Events the bucket holds (fractions accumulate between refills).
    var tokens: Double
    /// When `tokens` was last brought up to date (monotonic nanoseconds).
    var refilledAt: UInt64
    /// The UTC minute (Unix seconds / 60) `authFailures` counts in.
    var authMinute: Int64 = .min
    /// `401` answers in `authMinute`.
    var authFailures = 0
    /// The UTC minute of the last warning logged for this address.
    var warnedMinute: Int64 = .min
}

/// The clients' states, at most `capacity` of them: the least recently seen address is forgotten
/// when a new one comes (a forgotten address starts again with a full bucket). Lookups and updates
/// are one dictionary probe and a few index moves; no allocation once full. Not thread-safe:
/// `ClientLimits` keeps it behind a mutex.
struct ClientTable {
    private struct Slot {
        var address: IPAddress
        var state: ClientState
        /// The slots seen just after and just before this one (-1: none), a list from newest to oldest.
        var newer: Int32
        var older: Int32
    }

    let capacity: Int
    private var slots: [Slot] = []
    private var index: [IPAddress: Int32] = [:]
    private var newest: Int32 = -1
    private var oldest: Int32 = -1

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Addresses tracked now.
    var count: Int { index.count }

    /// Whether `address` is tracked (tests).
    func contains(_ address: IPAddress) -> Bool { index[address] != nil }

    /// The state of `address`, without marking it seen; nil when it is not tracked.
    func peek(_ address: IPAddress) -> ClientState? {
        index[address].map { slots[Int($0)].state }
    }

    /// Runs `body` on the state of `address` (made by `fresh` when the address is not tracked,
    /// forgetting the least recently seen one if the table is full) and marks it the most recently seen.
    mutating func update<T>(_ address: IPAddress, fresh: () -> ClientState, _ body: (inout ClientState) -> T) -> T {
        let slot: Int32
        if let found = index[address] {
            slot = found
            unlink(slot)
        } else if slots.count < capacity {
            slot = Int32(slots.count)
            slots.append(Slot(address: address, state: fresh(), newer: -1, older: -1))
            index[address] = slot
        } else {
            slot = oldest
            unlink(slot)
            index[slots[Int(slot)].address] = nil
            slots[Int(slot)].address = address
            slots[Int(slot)].state = fresh()
            index[address] = slot
        }
        linkAsNewest(slot)
        return body(&slots[Int(slot)].state)
    }

    private mutating func unlink(_ slot: Int32) {
        let newer = slots[Int(slot)].newer
        let older = slots[Int(slot)].older
        if newer >= 0 { slots[Int(newer)].older = older } else { newest = older }
        if older >= 0 { slots[Int(older)].newer = newer } else { oldest = newer }
        slots[Int(slot)].newer = -1
        slots[Int(slot)].older = -1
    }

    private mutating func linkAsNewest(_ slot: Int32) {
        slots[Int(slot)].older = newest
        slots[Int(slot)].newer = -1
        if newest >= 0 { slots[Int(newest)].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
