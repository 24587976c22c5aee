/// What a journal held at start, resolved from its records: the events still undelivered and the
/// batches they were cut into, so that a restarted tracker resends the same batches, then the rest.
struct JournalContents: Sendable, Equatable {
    /// A batch cut before the restart, with its events in their original order.
    struct OpenBatch: Sendable, Equatable {
        var id: UInt64
        var correction: Int64?
        var sequences: [UInt64]
    }

    /// Undelivered events by sequence number.
    var events: [UInt64: TrackedEvent] = [:]
    /// Open batches, oldest first (by their first event).
    var batches: [OpenBatch] = []
    /// Events in no batch, oldest first.
    var waiting: [UInt64] = []
    /// The next free sequence number and batch id.
    var nextSequence: UInt64 = 1
    var nextBatchID: UInt64 = 1
    /// Bytes of the file that were skipped as torn or damaged.
    var skippedBytes = 0
    /// The file's size when it was read.
    var fileBytes = 0
    /// The file's format is newer than this library's.
    var unsupportedVersion: UInt8?

    static let empty = JournalContents()

    /// Resolves records in file order. Events are collected first and membership second, so a
    /// record's place relative to its events does not matter; of two batch records naming an event,
    /// the later one holds it.
    init(records: [JournalRecord], skippedBytes: Int = 0) {
        self.skippedBytes = skippedBytes
        var events: [UInt64: TrackedEvent] = [:]
        var batchOrder: [UInt64] = []
        var batchCorrections: [UInt64: Int64?] = [:]
        var owner: [UInt64: UInt64] = [:]
        var closed = Set<UInt64>()
        var dropped = Set<UInt64>()
        var highestSequence: UInt64 = 0
        var highestBatch: UInt64 = 0
        for record in records {
            switch record {
            case let .header(version):
                if version != JournalRecord.currentVersion { unsupportedVersion = version }
            case let .event(sequence, event):
                events[sequence] = event
                highestSequence = max(highestSequence, sequence)
            case let .batch(id, correction, sequences):
                if batchCorrections[id] == nil { batchOrder.append(id) }
                batchCorrections[id] = correction
                for sequence in sequences { owner[sequence] = id }
                highestBatch = max(highestBatch, id)
            case let .batchClosed(id):
                closed.insert(id)
                highestBatch = max(highestBatch, id)
            case let .dropped(sequences):
                dropped.formUnion(sequences)
            }
        }
        nextSequence = highestSequence + 1
        nextBatchID = highestBatch + 1
        if unsupportedVersion != nil { return }

        var members: [UInt64: [UInt64]] = [:]
        for (sequence, event) in events.sorted(by: { $0.key < $1.key }) {
            guard !dropped.contains(sequence) else { continue }
            if let batch = owner[sequence] {
                guard !closed.contains(batch) else { continue }
                members[batch, default: []].append(sequence)
            } else {
                waiting.append(sequence)
            }
            self.events[sequence] = event
        }
        batches = batchOrder.compactMap { id in
            guard let sequences = members[id], !sequences.isEmpty else { return nil }
            return OpenBatch(id: id, correction: batchCorrections[id] ?? nil, sequences: sequences)
        }.sorted { $0.sequences[0] < $1.sequences[0] }
    }

    init() {}

    /// The records that rebuild exactly this state in a fresh file (compaction).
    var records: [JournalRecord] {
        var records: [JournalRecord] = [.header(version: JournalRecord.currentVersion)]
        for (sequence, event) in events.sorted(by: { $0.key < $1.key }) {
            records.append(.event(sequence: sequence, event))
        }
        for batch in batches {
            records.append(.batch(id: batch.id, correction: batch.correction, sequences: batch.sequences))
        }
        return records
    }
}
