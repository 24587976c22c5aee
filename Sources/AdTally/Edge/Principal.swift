/// Who is calling, resolved once at the edge from the request's `Authorization` header and handed
/// to the slice with the request (`EdgeRequest`), so that no slice reads a credential itself.
public enum Principal: Sendable, Equatable {
    /// A public endpoint asked for no credential.
    case anonymous
    /// A publisher's bearer token, with its scopes (`ADTALLY_ADMIN_TOKEN` has them all).
    case token(AccessTokens.Scopes)
}
