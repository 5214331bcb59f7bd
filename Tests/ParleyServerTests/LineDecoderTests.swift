import Testing
import ParleyTestSupport

@testable import ParleyServer

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
private func line(_ s: String) -> LineDecoderEvent { .line(Array(s.utf8)) }

private func decode(_ input: [UInt8], chunks sizes: [Int], maximumLength: Int) -> [LineDecoderEvent] {
    var decoder = LineDecoder(maximumLength: maximumLength)
    var events: [LineDecoderEvent] = []
    var i = 0
    var k = 0
    while i < input.count {
        let n = min(sizes[k % sizes.count], input.count - i)
        events += decoder.feed(Array(input[i..<i + n]))
        i += n
        k += 1
    }
    return events
}

/// Feeds `input` whole, byte by byte, and in seeded random chunks; checks all three agree
/// and returns the events.
private func dripFeed(
    _ input: [UInt8], maximumLength: Int = 16 * 1024, seed: UInt64 = 1,
    sourceLocation: SourceLocation = #_sourceLocation
) -> [LineDecoderEvent] {
    let whole = decode(input, chunks: [max(input.count, 1)], maximumLength: maximumLength)
    let byByte = decode(input, chunks: [1], maximumLength: maximumLength)
    #expect(byByte == whole, "one byte at a time", sourceLocation: sourceLocation)
    var rng = SeededRNG(seed: seed)
    for _ in 0..<20 {
        let sizes = (0..<16).map { _ in Int.random(in: 1...max(2, input.count / 3 + 1), using: &rng) }
        #expect(decode(input, chunks: sizes, maximumLength: maximumLength) == whole, "chunks \(sizes)",
                sourceLocation: sourceLocation)
    }
    return whole
}

@Suite struct LineDecoderTests {
    @Test func newlineFramedLines() {
        #expect(dripFeed(bytes("iam:Luke\nmsg:Hey\n")) == [line("iam:Luke"), line("msg:Hey")])
    }

    @Test func crlfIsTolerated() {
        #expect(dripFeed(bytes("iam:Luke\r\nmsg:Hey\r\nmsg:mixed\n")) == [line("iam:Luke"), line("msg:Hey"), line("msg:mixed")])
    }

    @Test func loneCarriageReturnsStayInTheLine() {
        #expect(dripFeed(bytes("a\rb\n\r\r\nc\r\r\n")) == [line("a\rb"), line("\r"), line("c\r")])
    }

    @Test func emptyLinesAreDropped() {
        #expect(dripFeed(bytes("\n\r\n\nmsg:x\n\n")) == [line("msg:x")])
    }

    @Test func tooLongThenRecovery() {
        let input = bytes("msg:ok\n" + String(repeating: "x", count: 100) + "\nmsg:after\n")
        #expect(dripFeed(input, maximumLength: 16) == [line("msg:ok"), .tooLong, line("msg:after")])
    }

    @Test func exactlyMaximumLengthIsAccepted() {
        let sixteen = String(repeating: "y", count: 16)
        #expect(dripFeed(bytes(sixteen + "\n" + sixteen + "\r\n"), maximumLength: 16) == [line(sixteen), line(sixteen)])
        #expect(dripFeed(bytes(sixteen + "z\n"), maximumLength: 16) == [.tooLong])
        #expect(dripFeed(bytes(sixteen + "\rz\nok\n"), maximumLength: 16) == [.tooLong, line("ok")])
    }

    @Test func tooLongIsReportedAsSoonAsTheLimitIsPassed() {
        var decoder = LineDecoder(maximumLength: 8)
        #expect(decoder.feed(bytes("12345678")) == [])
        #expect(decoder.feed(bytes("9")) == [.tooLong])
        #expect(decoder.feed(bytes("more and more")) == [])
        #expect(decoder.hasPendingBytes)
        #expect(decoder.feed(bytes("end\nmsg:hi\n")) == [line("msg:hi")])
        #expect(!decoder.hasPendingBytes)
    }

    @Test func oneMebibyteWithoutNewlineGivesOneTooLong() {
        var decoder = LineDecoder()
        let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 64 * 1024)
        var events: [LineDecoderEvent] = []
        for _ in 0..<16 {
            events += decoder.feed(chunk)
        }
        #expect(events == [.tooLong])
        #expect(decoder.hasPendingBytes)  // still discarding, so the quiet timer stays armed
        // Bounded memory: the partial line was dropped when the limit was passed.
        #expect(decoder.quietPeriodElapsed() == [])
        #expect(!decoder.hasPendingBytes)
        #expect(decoder.feed(bytes("msg:alive\n")) == [line("msg:alive")])
    }

    @Test func oneMebibyteInOneFeed() {
        var decoder = LineDecoder()
        let big = [UInt8](repeating: UInt8(ascii: "B"), count: 1 << 20)
        #expect(decoder.feed(big) == [.tooLong])
        #expect(decoder.feed(bytes("still the long line\nmsg:next\n")) == [line("msg:next")])
    }

    @Test func quietPeriodFramesUnframedWrites() {
        var decoder = LineDecoder()
        #expect(!decoder.hasPendingBytes)
        #expect(decoder.feed(bytes("iam:Luke")) == [])
        #expect(decoder.hasPendingBytes)
        #expect(decoder.quietPeriodElapsed() == [line("iam:Luke")])
        #expect(!decoder.hasPendingBytes)
        #expect(decoder.feed(bytes("msg:")) == [])
        #expect(decoder.feed(bytes("Hey")) == [])
        #expect(decoder.quietPeriodElapsed() == [line("msg:Hey")])
        #expect(decoder.quietPeriodElapsed() == [])
    }

    @Test func quietPeriodDropsTrailingCarriageReturn() {
        var decoder = LineDecoder()
        #expect(decoder.feed(bytes("msg:x\r")) == [])
        #expect(decoder.hasPendingBytes)
        #expect(decoder.quietPeriodElapsed() == [line("msg:x")])
        #expect(decoder.feed(bytes("\r")) == [])
        #expect(decoder.quietPeriodElapsed() == [])
    }

    @Test func quietPeriodEndsDiscarding() {
        var decoder = LineDecoder(maximumLength: 4)
        #expect(decoder.feed(bytes("toolong")) == [.tooLong])
        #expect(decoder.quietPeriodElapsed() == [])
        #expect(decoder.feed(bytes("iam:")) == [])
        #expect(decoder.quietPeriodElapsed() == [line("iam:")])
    }

    @Test func mixedFramedAndUnframed() {
        var decoder = LineDecoder()
        #expect(decoder.feed(bytes("msg:a\nmsg:b")) == [line("msg:a")])
        #expect(decoder.quietPeriodElapsed() == [line("msg:b")])
    }

    @Test func binaryBytesPassThrough() {
        let input: [UInt8] = [0x6D, 0x00, 0xFF, 0xC3, 0x0A]
        #expect(dripFeed(input) == [.line([0x6D, 0x00, 0xFF, 0xC3])])
    }

    @Test func unicodeIntact() {
        let events = dripFeed(bytes("msg:héllo 👋\n"))
        #expect(events == [line("msg:héllo 👋")])
        if case .line(let l) = events.first { #expect(LineCommand.parse(l) == .msg("héllo 👋")) }
    }

    @Test func rawBufferFeed() {
        var decoder = LineDecoder()
        let events = bytes("msg:raw\n").withUnsafeBytes { decoder.feed($0) }
        #expect(events == [line("msg:raw")])
        #expect(decoder.feed(UnsafeRawBufferPointer(start: nil, count: 0)) == [])
    }

    @Test func randomLinesAnyChunking() {
        var rng = SeededRNG(seed: 42)
        for round in 0..<50 {
            var input: [UInt8] = []
            for _ in 0..<Int.random(in: 0..<12, using: &rng) {
                let length = Int.random(in: 0..<40, using: &rng)
                input += (0..<length).map { _ in
                    let b = UInt8.random(in: 0...255, using: &rng)
                    return b == 0x0A ? 0x20 : b
                }
                input += rng.next() % 2 == 0 ? [0x0A] : [0x0D, 0x0A]
            }
            let events = dripFeed(input, maximumLength: 24, seed: UInt64(round))
            for case .line(let l) in events {
                #expect(!l.isEmpty && l.count <= 24 && !l.contains(0x0A))
            }
        }
    }

    @Test func garbageNeverCrashesAndStaysBounded() {
        var rng = SeededRNG(seed: 0xDEAD)
        var decoder = LineDecoder(maximumLength: 64)
        for _ in 0..<5000 {
            let chunk = (0..<Int.random(in: 0..<200, using: &rng)).map { _ in
                rng.next() % 8 == 0 ? UInt8(ascii: "\n") : UInt8.random(in: 0...255, using: &rng)
            }
            for event in decoder.feed(chunk) {
                if case .line(let l) = event {
                    #expect(!l.isEmpty && l.count <= 64)
                    _ = LineCommand.parse(l)
                }
            }
            if rng.next() % 10 == 0 {
                for case .line(let l) in decoder.quietPeriodElapsed() {
                    #expect(l.count <= 64)
                }
            }
        }
    }
}

@Suite struct LineCommandTests {
    @Test func iam() {
        #expect(LineCommand.parse(bytes("iam:Luke")) == .iam("Luke"))
        #expect(LineCommand.parse(bytes("iam:  Luke Skywalker \t\r")) == .iam("Luke Skywalker"))
        #expect(LineCommand.parse(bytes("iam:")) == .iam(""))
    }

    @Test func msgKeepsEverythingAfterTheFirstPrefix() {
        #expect(LineCommand.parse(bytes("msg:a:b:c")) == .msg("a:b:c"))
        #expect(LineCommand.parse(bytes("msg:msg:x")) == .msg("msg:x"))
        #expect(LineCommand.parse(bytes("msg:  spaced  ")) == .msg("  spaced  "))
        #expect(LineCommand.parse(bytes("msg:Hey\r")) == .msg("Hey"))
        #expect(LineCommand.parse(bytes("msg:")) == .msg(""))
        #expect(LineCommand.parse(bytes("msg:\u{301}accent")) == .msg("\u{301}accent"))
    }

    @Test func auth() {
        #expect(LineCommand.parse(bytes("auth: eyJ.abc.def ")) == .auth("eyJ.abc.def"))
    }

    @Test func unknown() {
        #expect(LineCommand.parse(bytes("hello")) == .unknown("hello"))
        #expect(LineCommand.parse(bytes("MSG:x")) == .unknown("MSG:x"))
        #expect(LineCommand.parse(bytes(" msg:x")) == .unknown(" msg:x"))
        #expect(LineCommand.parse(bytes("ms")) == .unknown("ms"))
        #expect(LineCommand.parse([]) == .unknown(""))
    }

    @Test func invalidUTF8IsRepaired() {
        #expect(LineCommand.parse([0x6D, 0x73, 0x67, 0x3A, 0x61, 0xFF, 0x62]) == .msg("a\u{FFFD}b"))
        #expect(LineCommand.parse([0x69, 0x61, 0x6D, 0x3A, 0xC3]) == .iam("\u{FFFD}"))
        #expect(LineCommand.parse([0xFE, 0x41]) == .unknown("\u{FFFD}A"))
    }

    @Test func unicodeNames() {
        #expect(LineCommand.parse(bytes("iam:Zoë 👋")) == .iam("Zoë 👋"))
    }
}
