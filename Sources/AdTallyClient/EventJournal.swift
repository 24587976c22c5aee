/// Where a durable tracker writes its records: a seam with the file journal for apps and a
/// controllable one for tests that prove the caller's thread never waits for the disk.
///
/// Every method is called with the tracker's lock held, so it must only enqueue its work and return;
/// the work must run in the order of the calls, and the completion must come later, on another
/// thread.
protocol EventJournal: Sendable {
    /// Reads what an earlier run left; called once, before anything else.
    func load(_ completion: @escaping @Sendable (Result<JournalContents, TrackerError>) -> Void)
    /// Appends records; with `durable`, `fsync`s before completing. Completes with the file's size.
    func append(_ records: [JournalRecord], durable: Bool,
                _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void)
    /// Replaces the whole journal by `records`, durably (compaction). Completes with the file's size.
    func rewrite(_ records: [JournalRecord], _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void)
    /// Closes the files after the work already enqueued.
    func close(_ completion: @escaping @Sendable () -> Void)
}
