extension String {
    /// A quoted excerpt of a bad value (its first 40 characters), for the one line that names it.
    public var quotedExcerpt: String { "\"\(prefix(40))\"" }
}
