@testable import AdTally
import Testing

/// The chunks of the store's multi-row inserts: few texts per table, few statements per batch.
@Suite(.timeLimit(.minutes(3))) struct ValuesInsertTests {
    @Test func chunksCoverEveryRowOnceInOrderWithFewStatements() {
        for count in 0...700 {
            let chunks = ValuesInsert.chunks(count)
            #expect(chunks.map(\.count).reduce(0, +) == count)
            #expect(zip(chunks, chunks.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
            #expect(chunks.allSatisfy { ValuesInsert.sizes.contains($0.count) })
            if count > 0 { #expect(chunks.count <= (count - 1) / 128 + 4) }
        }
        #expect(ValuesInsert.chunks(50).map(\.count) == [48, 2])
        #expect(ValuesInsert.chunks(1).map(\.count) == [1])
    }

    @Test func aStatementsTextDependsOnItsRowCountOnly() {
        let build = { (count: Int, value: String) in
            ValuesInsert.statements("INSERT INTO t (a, b)", count: count) { index, sql in
                sql.appendLiteral("(")
                sql.appendInterpolation(value)
                sql.appendLiteral(", ")
                sql.appendInterpolation(index)
                sql.appendLiteral(")")
            }
        }
        let first = build(5, "x"), second = build(5, "y")
        #expect(first.map(\.sql) == second.map(\.sql))
        #expect(first.map(\.sql) == ["INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6), ($7, $8)", "INSERT INTO t (a, b) VALUES ($1, $2)"])
        #expect(first.map(\.binds.count) == [8, 2])
    }
}
