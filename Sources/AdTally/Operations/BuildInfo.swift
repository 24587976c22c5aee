/// What was built: one constant, so that `adtally --version` and `/metrics`
/// (`adtally_build_info{version}`) cannot disagree about which release is running.
public enum BuildInfo {
    /// The release version (semantic versioning); raise it with each release.
    public static let version = "0.1.0"
}
