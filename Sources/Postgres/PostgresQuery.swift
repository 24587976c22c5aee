/// One SQL statement and its bound parameters, built by string interpolation (postgres-nio's
/// `PostgresQuery` model): every value interpolated into the text becomes a bound parameter, and the
/// query writes its `$n` in the value's place. A value and its placeholder are written once,
/// together, so no statement numbers its parameters by hand and none can splice a value into the
/// SQL text by accident:
///
///     let query: PostgresQuery = "SELECT name FROM ads WHERE ad_id = \(adID) AND day >= \(from)"
///     // sql: "SELECT name FROM ads WHERE ad_id = $1 AND day >= $2", binds: [adID, from]
///
/// SQL text enters only as the literal parts (static text), through `unsafeSQL:` (static text too,
/// where the text is chosen: a column, a clause of a fixed set), through `identifier:` (a name
/// quoted as an SQL identifier), `integerLiteral:` (a number written out, where SQL takes no
/// parameter) or as another `PostgresQuery` (a fragment whose parameters are renumbered where it
/// lands). Only `init(unsafeRawSQL:binds:)` takes text made at run time: a migration file's
/// statement, or a test's.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    /// A piece of the statement: text, or the parameter of `binds` at that index.
    enum Piece: Sendable {
        case text(String)
        case bind(Int)
    }

    /// The statement's text with its placeholders (`$1`, `$2`, ... in order of appearance).
    public private(set) var sql: String
    /// The parameters, `binds[n - 1]` for `$n`.
    public private(set) var binds: [any PostgresBindable]
    /// The statement's pieces, kept so that a fragment can be renumbered where it is interpolated.
    private var pieces: [Piece]
    /// Where in this program the statement is sent from (`EventStore.swift:120`), named in errors;
    /// set by the call that sends it when the query does not carry one.
    public var location: String?
    /// Whether the statement is prepared once per connection (`PostgresConnection`), as the
    /// program's constant texts are. False for a text that varies with its input (a `VALUES` list
    /// as long as its rows: `sentUnnamed`), which would fill the connection's statements with
    /// texts used once; it is sent unnamed, parsed with every execution.
    public private(set) var isPrepared = true

    /// SQL text sent as it is, with parameters already numbered in it (`$1` is `binds[0]`): the one
    /// escape for text made at run time, so it must never contain a value from outside. For a
    /// statement of a migration file (which this program ships) or a test's hand-written statement;
    /// product code interpolates instead.
    public init(unsafeRawSQL sql: String, binds: [any PostgresBindable] = []) {
        self.sql = sql
        self.binds = binds
        self.pieces = [.text(sql)]
    }

    /// Static text: a literal cannot hold a value from outside.
    public init(stringLiteral value: StaticString) {
        let text = value.description
        self.init(unsafeRawSQL: text)
    }

    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        binds = stringInterpolation.binds
        pieces = stringInterpolation.pieces
    }

    /// Builds the text and the parameters of a query as it is interpolated.
    public struct StringInterpolation: StringInterpolationProtocol {
        public typealias StringLiteralType = StaticString
        var sql = ""
        var binds: [any PostgresBindable] = []
        var pieces: [Piece] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + 4 * interpolationCount)
            binds.reserveCapacity(interpolationCount)
            pieces.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ literal: StaticString) {
            appendText(literal.description)
        }

        /// A value: bound as the next parameter, its `$n` written here.
        public mutating func appendInterpolation(_ value: some PostgresBindable) {
            appendBind(value)
        }

        /// Binds an optional value: nil is bound as `NULL` (an overload of its own, so that the
        /// compiler does not take it for an optional printed by mistake).
        public mutating func appendInterpolation<Wrapped: PostgresTextBindable>(_ value: Wrapped?) {
            appendBind(value)
        }

        /// Static text chosen at run time (a column, a clause of a fixed set), sent as it is: never
        /// a value from outside, which only the other interpolations take.
        public mutating func appendInterpolation(unsafeSQL text: StaticString) {
            appendText(text.description)
        }

        /// A number written into the text, where SQL takes no parameter (`FETCH FORWARD 1000`).
        public mutating func appendInterpolation(integerLiteral number: Int) {
            appendText(String(number))
        }

        /// A name (a table, a partition) as a quoted SQL identifier: in double quotes, a double
        /// quote inside doubled. For DDL, which takes no parameters.
        public mutating func appendInterpolation(identifier name: String) {
            appendText("\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"")
        }

        /// Another query, its parameters renumbered to follow this one's.
        public mutating func appendInterpolation(_ fragment: PostgresQuery) {
            // A query made with `init(unsafeRawSQL:binds:)` numbers its parameters in its own text,
            // which cannot be renumbered: using one as a fragment is a programmer error, caught by
            // the first test that builds it.
            precondition(fragment.binds.isEmpty || fragment.pieces.contains { if case .bind = $0 { true } else { false } },
                         "a query with hand-numbered parameters cannot be a fragment")
            for piece in fragment.pieces {
                switch piece {
                case .text(let text): appendText(text)
                case .bind(let index): appendBind(fragment.binds[index])
                }
            }
        }

        mutating func appendText(_ text: String) {
            guard !text.isEmpty else { return }
            sql += text
            if case .text(let last)? = pieces.last {
                pieces[pieces.count - 1] = .text(last + text)
            } else {
                pieces.append(.text(text))
            }
        }

        mutating func appendBind(_ value: any PostgresBindable) {
            pieces.append(.bind(binds.count))
            binds.append(value)
            sql += "$"
            sql += String(binds.count)
        }
    }
}

extension PostgresQuery {
    /// `lhs` followed by `rhs`, `rhs`'s parameters renumbered.
    public static func + (lhs: PostgresQuery, rhs: PostgresQuery) -> PostgresQuery {
        "\(lhs)\(rhs)"
    }

    /// The statement that limits every later statement of the transaction to `limit` (text such as
    /// `300s`): `statement_timeout` set locally, so that it ends with the transaction.
    public static func statementTimeout(_ limit: String) -> PostgresQuery {
        "SELECT set_config('statement_timeout', \(limit), true)"
    }

    /// The query, sent unnamed (`isPrepared` false): for a text that varies with its input.
    public var sentUnnamed: PostgresQuery {
        var copy = self
        copy.isPrepared = false
        return copy
    }

    /// The query with `location` set, unless it carries one already.
    func located(_ file: StaticString, _ line: UInt) -> PostgresQuery {
        guard location == nil else { return self }
        var copy = self
        copy.location = PostgresConnection.location(file, line)
        return copy
    }
}

extension Sequence where Element == PostgresQuery {
    /// The queries one after another with `separator` (static text) between them, each one's
    /// parameters renumbered: for a `UNION ALL` of branches or a list of columns or conditions.
    public func joined(separator: StaticString) -> PostgresQuery {
        var interpolation = PostgresQuery.StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        for (index, query) in enumerated() {
            if index > 0 { interpolation.appendText(separator.description) }
            interpolation.appendInterpolation(query)
        }
        return PostgresQuery(stringInterpolation: interpolation)
    }
}
