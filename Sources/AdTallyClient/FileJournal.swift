import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The journal in a directory: `events.journal`, appended to and `fsync`ed (on Apple platforms with
/// `F_FULLFSYNC`, which also flushes the drive's cache), rewritten whole by compaction through a
/// temporary file and an atomic rename; and `lock`, held with `flock` for the tracker's lifetime so
/// that no second tracker writes into the same journal. Its work runs on a serial queue of its own.
final class FileJournal: EventJournal {
    private let directory: URL
    private let journalPath: String
    private let temporaryPath: String
    private let queue = DispatchQueue(label: "AdTallyClient.FileJournal", qos: .utility)

    private struct Files {
        var journal: Int32 = -1
        var lock: Int32 = -1
        var size = 0
    }

    /// Only touched on `queue` after `init` (the lock keeps the compiler's Sendable check honest).
    private let files = Lock(Files())

    /// Creates the directory if needed and takes its lock.
    init(directory: URL) throws(TrackerError) {
        self.directory = directory
        journalPath = directory.appendingPathComponent("events.journal").path
        temporaryPath = directory.appendingPathComponent("events.journal.tmp").path
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw .journalUnavailable("cannot create \(directory.path): \(error.localizedDescription)")
        }
        let lockPath = directory.appendingPathComponent("lock").path
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw .journalUnavailable("cannot open \(lockPath): \(Self.errorText())") }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            closeDescriptor(lock)
            throw busy ? .journalInUse(directory.path) : .journalUnavailable("cannot lock \(lockPath): \(Self.errorText())")
        }
        let journal = open(journalPath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard journal >= 0 else {
            closeDescriptor(lock)
            throw .journalUnavailable("cannot open \(journalPath): \(Self.errorText())")
        }
        files.withLock { $0 = Files(journal: journal, lock: lock, size: 0) }
    }

    deinit {
        files.withLock { files in
            if files.journal >= 0 { closeDescriptor(files.journal) }
            if files.lock >= 0 { closeDescriptor(files.lock) }
        }
    }

    private static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    func load(_ completion: @escaping @Sendable (Result<JournalContents, TrackerError>) -> Void) {
        queue.async { completion(self.readAll()) }
    }

    private func readAll() -> Result<JournalContents, TrackerError> {
        let fd = files.withLock { $0.journal }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count > 0 { bytes.append(contentsOf: chunk[0..<count]); continue }
            if count == 0 { break }
            if errno == EINTR { continue }
            return .failure(.journalUnavailable("cannot read \(journalPath): \(Self.errorText())"))
        }
        files.withLock { $0.size = bytes.count }
        let scan = JournalFraming.scan(bytes)
        var contents = JournalContents(records: scan.records, skippedBytes: scan.skippedBytes)
        contents.fileBytes = bytes.count
        if let version = contents.unsupportedVersion {
            // A newer library wrote it (the app was downgraded): keep it aside rather than misread it.
            let aside = journalPath + ".v\(version)"
            _ = rename(journalPath, aside)
            reopen()
            var fresh = JournalContents()
            fresh.unsupportedVersion = version
            return .success(fresh)
        }
        return .success(contents)
    }

    private func reopen() {
        let fd = open(journalPath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        files.withLock { files in
            if files.journal >= 0 { closeDescriptor(files.journal) }
            files.journal = fd
            files.size = 0
        }
    }

    func append(_ records: [JournalRecord], durable: Bool,
                _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        queue.async {
            var bytes: [UInt8] = []
            let (fd, empty) = self.files.withLock { ($0.journal, $0.size == 0) }
            // A new file starts with its format.
            if empty { JournalFraming.append(.header(version: JournalRecord.currentVersion), to: &bytes) }
            for record in records { JournalFraming.append(record, to: &bytes) }
            if let failure = Self.writeAll(bytes, to: fd) ?? (durable ? Self.sync(fd) : nil) {
                completion(.failure(.journalUnavailable("cannot write \(self.journalPath): \(failure)")))
                return
            }
            let size = self.files.withLock { files -> Int in
                files.size += bytes.count
                return files.size
            }
            completion(.success(size))
        }
    }

    func rewrite(_ records: [JournalRecord], _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        queue.async {
            var bytes: [UInt8] = []
            for record in records { JournalFraming.append(record, to: &bytes) }
            let temporary = open(self.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard temporary >= 0 else {
                completion(.failure(.journalUnavailable("cannot create \(self.temporaryPath): \(Self.errorText())")))
                return
            }
            let failure = Self.writeAll(bytes, to: temporary) ?? Self.sync(temporary)
            closeDescriptor(temporary)
            if let failure {
                _ = unlink(self.temporaryPath)
                completion(.failure(.journalUnavailable("cannot write \(self.temporaryPath): \(failure)")))
                return
            }
            guard rename(self.temporaryPath, self.journalPath) == 0 else {
                completion(.failure(.journalUnavailable("cannot replace \(self.journalPath): \(Self.errorText())")))
                return
            }
            // The rename is durable once the directory is.
            let directory = open(self.directory.path, O_RDONLY | O_CLOEXEC)
            if directory >= 0 {
                _ = fsync(directory)
                closeDescriptor(directory)
            }
            self.reopen()
            let size = self.files.withLock { files -> Int in
                files.size = bytes.count
                return files.size
            }
            completion(.success(size))
        }
    }

    func close(_ completion: @escaping @Sendable () -> Void) {
        queue.async {
            self.files.withLock { files in
                if files.journal >= 0 { closeDescriptor(files.journal) }
                if files.lock >= 0 { closeDescriptor(files.lock) }
                files.journal = -1
                files.lock = -1
            }
            completion()
        }
    }

    /// Writes everything or says why not.
    private static func writeAll(_ bytes: [UInt8], to fd: Int32) -> String? {
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if count > 0 { written += count; continue }
            if count < 0, errno == EINTR { continue }
            return errorText()
        }
        return nil
    }

    /// Makes what was written durable, or says why not.
    private static func sync(_ fd: Int32) -> String? {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return nil }
        #endif
        return fsync(fd) == 0 ? nil : errorText()
    }
}

/// `close(2)`, which `FileJournal`'s own `close(_:)` method would shadow.
private func closeDescriptor(_ fd: Int32) {
    #if canImport(Darwin)
    _ = Darwin.close(fd)
    #elseif canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Musl.close(fd)
    #endif
}
