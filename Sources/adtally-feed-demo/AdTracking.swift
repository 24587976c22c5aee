import AdTallyClient

/// The feed controller's analytics seam, declared by the app (here, the simulator) as the seed code
/// declares it; AdTallyClient's adapter fits it with one line.
@MainActor protocol AdTracking {
    func track(_ event: String, _ properties: [String: Any])
}

extension AdTrackingAdapter: AdTracking {}
