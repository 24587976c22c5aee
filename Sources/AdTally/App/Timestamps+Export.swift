// `Timestamp` is part of AdTally's API (events, rules, reports): whoever imports AdTally gets it.
@_exported import Timestamps
