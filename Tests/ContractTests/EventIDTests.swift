@testable import Contract
import Testing

@Suite(.timeLimit(.minutes(3))) struct EventIDTests {
    @Test(arguments: [
        ("5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e", "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e"),
        ("5F0C8A1E-7F3B-4A52-9D7E-0C1F2B3A4D5E", "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e"),
        ("5f0C8a1E-7f3B-4a52-9D7e-0c1F2b3A4d5E", "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e"),
        ("00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"),
    ])
    func canonicalisesToLowercase(_ input: String, _ expected: String) {
        #expect(EventID.canonical(input) == expected)
    }

    @Test(arguments: [
        "", "5f0c8a1e7f3b4a529d7e0c1f2b3a4d5e", "{5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e}",
        "urn:uuid:5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e", "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5",
        "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e0", "5f0c8a1g-7f3b-4a52-9d7e-0c1f2b3a4d5e",
        "5f0c8a1-e7f3b-4a52-9d7e-0c1f2b3a4d5e", " 5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e",
        "5f0c8a1e_7f3b_4a52_9d7e_0c1f2b3a4d5e", "５f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e",
    ])
    func refuses(_ input: String) {
        #expect(EventID.canonical(input) == nil)
    }
}
