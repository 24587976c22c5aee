import Postgres

/// A multi-row `INSERT ... VALUES (...), (...)`, the form of the store's inserts (`events`, the
/// ledger) that both engines run in place: Citus routes a list of one session's rows to that
/// session's shard (a router query, "Task Count: 1"), where `INSERT ... SELECT FROM unnest(...)`
/// is pulled to the node that runs it and copied into every shard it names under two-phase commit
/// (docs/SCALING.md). Plain PostgreSQL takes either at about the same cost.
///
/// A statement's text depends on its number of rows, and the connection prepares each text once:
/// rows go in chunks of a few fixed sizes (the largest that fits, then the next), so that a
/// connection prepares at most `sizes.count` texts per table, and a batch of `n` rows takes two or
/// three statements for `n` up to 128 (50: 48 + 2), one more per 128 after that.
enum ValuesInsert {
    /// The chunk sizes, largest first: powers of two and three times powers of two up to 128.
    static let sizes = [128, 96, 64, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2, 1]

    /// `0..<count` cut into consecutive chunks of `sizes`, largest first.
    static func chunks(_ count: Int) -> [Range<Int>] {
        var chunks: [Range<Int>] = []
        var start = 0
        while start < count {
            // 1 is in sizes: some size always fits.
            let size = sizes.first { $0 <= count - start } ?? 1
            chunks.append(start..<(start + size))
            start += size
        }
        return chunks
    }

    /// The statements that insert `count` rows: `head` (`INSERT INTO table (columns)`, text this
    /// program owns) and each chunk's `VALUES` list, whose row `i` `row` writes (its values
    /// interpolated, parenthesised) into the statement being built.
    static func statements(_ head: String, count: Int,
                           row: (Int, inout PostgresQuery.StringInterpolation) -> Void) -> [PostgresQuery] {
        chunks(count).map { chunk in
            var sql = PostgresQuery.StringInterpolation(literalCapacity: head.utf8.count + 64 * chunk.count, interpolationCount: 12 * chunk.count)
            sql.appendLiteral(head)
            sql.appendLiteral(" VALUES ")
            for index in chunk {
                if index > chunk.lowerBound { sql.appendLiteral(", ") }
                row(index, &sql)
            }
            return PostgresQuery(stringInterpolation: sql)
        }
    }
}
