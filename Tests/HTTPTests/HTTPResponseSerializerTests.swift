import HTTP
import Testing

@Test(.timeLimit(.minutes(3))) func serializesWithContentLengthAndDate() {
    let bytes = HTTPResponseSerializer.response(status: .ok, headers: ["Content-Type": "application/json", "Content-Length": "999", "X-Bad": "a\r\nInjected: 1"],
                                                body: Array("{}".utf8), date: "Sun, 06 Nov 1994 08:49:37 GMT")
    let text = String(decoding: bytes, as: UTF8.self)
    #expect(text == "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n{}")
}

@Test(.timeLimit(.minutes(3))) func formatsIMFFixdate() {
    #expect(HTTPDate.format(epochSeconds: 784111777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    #expect(HTTPDate.now().hasSuffix(" GMT"))
}

@Test(.timeLimit(.minutes(3))) func chunkFraming() {
    #expect(HTTPResponseSerializer.chunk(Array(repeating: 65, count: 26)) == Array("1a\r\n\(String(repeating: "A", count: 26))\r\n".utf8))
    #expect(HTTPResponseSerializer.chunk([]) == [])
}

@Test(.timeLimit(.minutes(3))) func headersLookupIsCaseInsensitive() {
    let h: HTTPHeaders = ["Content-Type": "a", "X-Multi": "1", "x-multi": "2", "Connection": "keep-alive, Upgrade"]
    #expect(h["content-type"] == "a")
    #expect(h.values(for: "X-MULTI") == ["1", "2"])
    #expect(h.containsToken("upgrade", in: "connection"))
}
