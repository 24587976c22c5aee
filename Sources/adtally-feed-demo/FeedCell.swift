/// The one cell class of the feed. `tapHandlers` is what `addAction` and `addGestureRecognizer`
/// build up (they add; nothing removes); `onTap` is the fixed code's single closure, set on every
/// configure and cleared in `prepareForReuse`.
@MainActor final class FeedCell {
    var title = ""
    var tapHandlers: [() -> Void] = []
    var onTap: (() -> Void)?

    /// A tap on the card: every handler the cell holds fires.
    func tap() {
        for handler in tapHandlers { handler() }
        onTap?()
    }

    func prepareForReuse() {
        onTap = nil
    }
}
