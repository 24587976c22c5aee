import Foundation

extension Thread {
    /// Starts a thread named `name` that runs `body`: the one way the server's long-lived workers
    /// (HTTP workers, committers, maintenance) start. With `group`, the group is entered first and
    /// left when `body` returns, so that a stop can wait for the thread.
    public static func start(name: String, stackSize: Int? = nil, in group: DispatchGroup? = nil,
                             _ body: @escaping @Sendable () -> Void) {
        group?.enter()
        let thread = Thread {
            body()
            group?.leave()
        }
        if let stackSize { thread.stackSize = stackSize }
        thread.name = name
        thread.start()
    }
}
