@testable import AdTally
import Testing

/// The splitting of a migration into statements (each sent on its own, for Citus): a `;` inside a
/// string, identifier, dollar quote or comment does not end a statement.
@Suite(.timeLimit(.minutes(3))) struct SQLStatementsTests {
    @Test(arguments: [
        ("SELECT 1; SELECT 2;", ["SELECT 1", " SELECT 2"]),
        ("SELECT 1", ["SELECT 1"]),
        ("  \n-- only a comment;\n  ;  ", []),
        ("SELECT ';' AS a, 'it''s; fine'; SELECT 2", ["SELECT ';' AS a, 'it''s; fine'", " SELECT 2"]),
        (#"SELECT E'back\'slash;' ; SELECT 3"#, [#"SELECT E'back\'slash;' "#, " SELECT 3"]),
        (#"SELECT 'no\'; SELECT 4"#, [#"SELECT 'no\'"#, " SELECT 4"]),
        (#"CREATE TABLE "odd;""name" (x int); SELECT 5"#, [#"CREATE TABLE "odd;""name" (x int)"#, " SELECT 5"]),
        ("DO $$ BEGIN PERFORM 1; PERFORM 2; END $$; SELECT 6", ["DO $$ BEGIN PERFORM 1; PERFORM 2; END $$", " SELECT 6"]),
        ("DO $body$ BEGIN RAISE NOTICE '$$;'; END $body$;SELECT 7", ["DO $body$ BEGIN RAISE NOTICE '$$;'; END $body$", "SELECT 7"]),
        ("SELECT $1::int; SELECT a$b FROM t; SELECT 8", ["SELECT $1::int", " SELECT a$b FROM t", " SELECT 8"]),
        ("/* a; /* nested; */ still; */ SELECT 9; -- tail; comment\nSELECT 10", ["/* a; /* nested; */ still; */ SELECT 9", " -- tail; comment\nSELECT 10"]),
        ("SELECT 11 -- the end;", ["SELECT 11 -- the end;"]),
    ])
    func splitsOnlyOnTopLevelSemicolons(_ sql: String, _ expected: [String]) {
        #expect(SQLStatements.split(sql) == expected)
    }

    /// An unterminated quote or comment keeps the rest of the text in one statement, which the
    /// server then refuses with its own error, rather than splitting it somewhere arbitrary.
    @Test(arguments: ["SELECT 'open; SELECT 2", "SELECT $$ open; SELECT 2", "SELECT /* open; SELECT 2", #"SELECT "open; SELECT 2"#])
    func anUnterminatedQuoteKeepsTheRestTogether(_ sql: String) {
        #expect(SQLStatements.split(sql) == [sql])
    }

    /// The project's migrations split into at least as many statements as they have top-level
    /// statement keywords at a line's start, and every piece starts with SQL or a comment.
    @Test func theProjectsMigrationsSplitIntoTheirStatements() throws {
        for migration in try MigrationRunnerTests.projectMigrations() {
            let pieces = SQLStatements.split(migration.sql)
            #expect(!pieces.isEmpty, "\(migration.fileName)")
            let starts = migration.sql.split(separator: "\n").filter { line in
                ["CREATE ", "ALTER ", "INSERT ", "UPDATE ", "DROP ", "DO ", "SELECT ", "COMMENT "].contains { line.hasPrefix($0) }
            }.count
            #expect(pieces.count >= starts, "\(migration.fileName): \(pieces.count) pieces, \(starts) statement starts")
        }
    }
}
