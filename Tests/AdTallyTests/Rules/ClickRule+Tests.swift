import AdTally
import AdTallyApp

extension ClickRule {
    /// The rule with the configuration's defaults, and what a test sets.
    static func configured(windowSeconds: Int? = nil, graceSeconds: Int? = nil, tapWindowMilliseconds: Int? = nil,
                           needsImpression: Bool? = nil, sessionClickLimit: Int? = nil) -> ClickRule {
        let defaults = Configuration().clickRule
        return ClickRule(windowSeconds: windowSeconds ?? defaults.windowSeconds, graceSeconds: graceSeconds ?? defaults.graceSeconds,
                         tapWindowMilliseconds: tapWindowMilliseconds ?? defaults.tapWindowMilliseconds,
                         needsImpression: needsImpression ?? defaults.needsImpression,
                         sessionClickLimit: sessionClickLimit ?? defaults.sessionClickLimit)
    }

    /// The rules of API version 1, before the grace window, the tap rule, the impression a click
    /// needs and the session's limit existed (the click window as given).
    static func version1(windowSeconds: Int = 30) -> ClickRule {
        ClickRule(windowSeconds: windowSeconds, graceSeconds: 0, tapWindowMilliseconds: 0, needsImpression: false, sessionClickLimit: 0)
    }
}
