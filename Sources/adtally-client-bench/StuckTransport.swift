import AdTallyClient

/// A server that never answers: with it, the cost measured on the caller's thread and in the
/// journal is the tracker's alone, with no sending competing for the CPU.
struct StuckTransport: EventTransport {
    func send(_ request: TransportRequest) async -> TransportResult {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
        return .failure("cancelled")
    }
}
