import Foundation
import Testing
import ParleyTestSupport

@testable import ParleyCore

private func parse(_ text: String, limits: JSONLimits = .init()) throws(JSONParseError) -> JSONValue {
    try JSONParser.parse(text, limits: limits)
}

private func parseError(_ bytes: [UInt8], limits: JSONLimits = .init()) -> JSONParseError? {
    do {
        _ = try JSONParser.parse(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}

@Suite struct JSONParserValidTests {
    @Test func scalars() throws {
        #expect(try parse("null") == .null)
        #expect(try parse("true") == true)
        #expect(try parse("false") == false)
        #expect(try parse("0") == 0)
        #expect(try parse("-0").numberValue?.text == "-0")
        #expect(try parse("42").intValue == 42)
        #expect(try parse("-1.5e+10").numberValue?.text == "-1.5e+10")
        #expect(try parse("1E-7").doubleValue == 1e-7)
        #expect(try parse("\"hi\"") == "hi")
        #expect(try parse("\"\"") == "")
    }

    @Test func whitespaceAroundTopValue() throws {
        #expect(try parse(" \t\r\n {\"a\" : [ 1 , 2 ] } \n") == ["a": [1, 2]])
    }

    @Test func containers() throws {
        #expect(try parse("[]") == [])
        #expect(try parse("{}") == .object(JSONObject()))
        let v = try parse(##"{"name":"Luke","color":"#ff0000","n":[1,{"x":null}],"t":true}"##)
        #expect(v["name"] == "Luke")
        #expect(v["color"]?.stringValue == "#ff0000")
        #expect(v["n"]?.arrayValue?.count == 2)
        #expect(v["n"]?.arrayValue?[1]["x"]?.isNull == true)
        #expect(v["t"]?.boolValue == true)
        #expect(v["missing"] == nil)
        #expect(v.objectValue?.keys == ["name", "color", "n", "t"])
    }

    @Test func keyOrderAndDuplicatesPreserved() throws {
        let text = #"{"z":1,"a":2,"m":3,"a":4}"#
        let v = try parse(text)
        #expect(v.objectValue?.keys == ["z", "a", "m", "a"])
        #expect(v["a"] == 4)  // last duplicate wins
        #expect(v.jsonString == text)
    }

    @Test func escapes() throws {
        let v = try parse(#""a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20AC\u0000""#)
        #expect(v == .string("a\"b\\c/d\u{8}\u{c}\n\r\tAé€\u{0}"))
    }

    @Test func unicodeAndSurrogatePairs() throws {
        #expect(try parse(#""\ud83d\udc4b""#) == "👋")
        #expect(try parse(#""\uD83D\uDE00 x""#) == "😀 x")
        #expect(try parse("\"héllo 👋 日本語 \u{10FFFF}\"") == "héllo 👋 日本語 \u{10FFFF}")
        #expect(try parse("{\"ключ\":\"значение\"}")["ключ"] == "значение")
    }

    @Test func bigNumbersKeptVerbatim() throws {
        let texts = [
            "12345678901234567890123456789", "-0.000000000000000000001", "1e400", "1.50",
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1E+2",
        ]
        for t in texts {
            let v = try parse(t)
            #expect(v.numberValue?.text == t)
            #expect(v.jsonString == t)
        }
        #expect(try parse("9223372036854775807").intValue == Int.max)
        #expect(try parse("-9223372036854775808").intValue == Int.min)
        #expect(try parse("9223372036854775808").intValue == nil)
        #expect(try parse("5.0").intValue == nil)
        #expect(try parse("1e3").intValue == nil)
        #expect(try parse("1e3").doubleValue == 1000)
        #expect(try parse("1e400").doubleValue == .infinity)
        #expect(try parse("-1e400").doubleValue == -.infinity)
    }

    @Test func deepButAllowedNesting() throws {
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        var v = try parse(deep)
        var depth = 0
        while let a = v.arrayValue {
            depth += 1
            guard let first = a.first else { break }
            v = first
        }
        #expect(depth == 64)
        let objects = String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64)
        #expect(try parse(objects).jsonString == objects)
    }

    @Test func limitsCanBeRaised() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let v = try parse(deep, limits: JSONLimits(maxDepth: 10_000))
        #expect(v.arrayValue?.count == 1)
    }

    @Test func allInputForms() throws {
        let text = #"{"a":[1,"x"]}"#
        let fromString = try JSONParser.parse(text)
        let fromArray = try JSONParser.parse(Array(text.utf8))
        let fromRaw = try Array(text.utf8).withUnsafeBytes { raw throws(JSONParseError) in
            try JSONParser.parse(raw)
        }
        #expect(fromString == fromArray)
        #expect(fromArray == fromRaw)
    }
}

@Suite struct JSONParserInvalidTests {
    static let invalid: [(String, [UInt8])] = {
        var cases: [(String, String)] = [
            ("empty", ""),
            ("only whitespace", "  \n"),
            ("trailing comma in array", "[1,2,]"),
            ("trailing comma in object", #"{"a":1,}"#),
            ("leading zero", "01"),
            ("leading zero negative", "-01"),
            ("leading zero in array", "[00]"),
            ("lone high surrogate", #""\ud83d""#),
            ("lone high surrogate then text", #""\ud83dx""#),
            ("high surrogate then non-low", #""\ud83d\u0041""#),
            ("lone low surrogate", #""\udc4b""#),
            ("raw control char", "\"a\u{1}b\""),
            ("raw newline in string", "\"a\nb\""),
            ("raw tab in string", "\"a\tb\""),
            ("bad escape", #""\x41""#),
            ("bad unicode escape", #""\u12G4""#),
            ("truncated unicode escape", #""\u12""#),
            ("unterminated string", #""abc"#),
            ("unterminated array", "[1,2"),
            ("unterminated object", #"{"a":1"#),
            ("missing colon", #"{"a" 1}"#),
            ("missing value", #"{"a":}"#),
            ("two top-level values", "1 2"),
            ("two top-level objects", "{}{}"),
            ("NaN", "NaN"),
            ("Infinity", "Infinity"),
            ("negative Infinity", "-Infinity"),
            ("single quotes", "'a'"),
            ("single-quoted key", "{'a':1}"),
            ("unquoted key", "{a:1}"),
            ("line comment", "[1] // c"),
            ("block comment", "/* c */ [1]"),
            ("plus sign", "+1"),
            ("bare minus", "-"),
            ("dot without digits", "1."),
            ("leading dot", ".5"),
            ("empty exponent", "1e"),
            ("exponent sign only", "1e+"),
            ("hex number", "0x10"),
            ("True capitalised", "True"),
            ("truncated literal", "nul"),
            ("literal with suffix", "nulls"),
            ("missing comma", "[1 2]"),
            ("comma only", "[,]"),
            ("leading comma", "[,1]"),
            ("mismatched brackets", "[1}"),
            ("non-string key", "{1:2}"),
            ("unescaped backslash at end", "\"abc\\"),
            ("byte order mark", "\u{FEFF}1"),
            ("vertical tab whitespace", "\u{0B}1"),
        ]
        cases.append(("depth 65 over limit", String(repeating: "[", count: 65) + String(repeating: "]", count: 65)))
        var result = cases.map { ($0.0, Array($0.1.utf8)) }
        result.append(("invalid UTF-8 continuation", [0x22, 0xC3, 0x28, 0x22]))
        result.append(("invalid UTF-8 lone continuation", [0x22, 0x80, 0x22]))
        result.append(("overlong UTF-8", [0x22, 0xC0, 0xAF, 0x22]))
        result.append(("UTF-8 encoded surrogate", [0x22, 0xED, 0xA0, 0x80, 0x22]))
        result.append(("UTF-8 above U+10FFFF", [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22]))
        result.append(("truncated UTF-8 at end", [0x22, 0xE2, 0x82]))
        result.append(("0xFF byte", [0x22, 0xFF, 0x22]))
        result.append(("non-ASCII outside string", [0xC3, 0xA9]))
        result.append(("NUL after value", [0x31, 0x00]))
        return result
    }()

    @Test(arguments: 0..<invalid.count)
    func rejected(index: Int) {
        let (name, bytes) = Self.invalid[index]
        let error = parseError(bytes)
        #expect(error != nil, "\(name) should be rejected")
        if let error {
            #expect(error.offset >= 0 && error.offset <= bytes.count, "\(name): \(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test func errorsSayWhatAndWhere() {
        #expect(parseError(Array("[1,2,]".utf8))?.offset == 5)
        #expect(parseError(Array("01".utf8))?.message.contains("leading zero") == true)
        #expect(parseError(Array(#""\ud83d""#.utf8))?.message.contains("surrogate") == true)
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let depthError = parseError(Array(deep.utf8))
        #expect(depthError?.message.contains("deeper than the limit of 64") == true)
        #expect(depthError?.offset == 64)
    }

    @Test func overMaxBytes() {
        let limits = JSONLimits(maxBytes: 10)
        #expect(parseError(Array("\"123456789\"".utf8), limits: limits)?.message.contains("larger") == true)
        #expect(parseError(Array("\"1234567\"".utf8), limits: limits) == nil)
        let big = "[" + String(repeating: "1,", count: 600_000) + "1]"
        #expect(parseError(Array(big.utf8))?.message.contains("larger") == true)
    }

    @Test func overMaxStringBytes() {
        let limits = JSONLimits(maxStringBytes: 4)
        #expect(parseError(Array(#""abcd""#.utf8), limits: limits) == nil)
        #expect(parseError(Array(#""abcde""#.utf8), limits: limits) != nil)
        #expect(parseError(Array(#""ab\ncd""#.utf8), limits: limits) != nil)
        #expect(parseError(Array(#"{"abcde":1}"#.utf8), limits: limits) != nil)
    }

    @Test func overMaxElements() {
        let limits = JSONLimits(maxElements: 3)
        #expect(parseError(Array("[1,2,3]".utf8), limits: limits) == nil)
        #expect(parseError(Array("[1,2,3,4]".utf8), limits: limits)?.message.contains("elements") == true)
        #expect(parseError(Array(#"{"a":1,"b":2,"c":3,"d":4}"#.utf8), limits: limits) != nil)
        #expect(parseError(Array("[[1,2,3],[1,2,3],[1,2,3]]".utf8), limits: limits) == nil)
    }

    @Test func randomGarbageNeverCrashes() {
        var rng = SeededRNG(seed: 0xBAD_5EED)
        let alphabet = Array("{}[]\":,-0123456789.eE+tfnrulase\\/ \n\t\u{1}".utf8) + [0xC3, 0xA9, 0xFF, 0xED, 0xA0, 0x80, 0xF0, 0x9F]
        var accepted = 0
        for _ in 0..<5000 {
            let length = Int.random(in: 0..<40, using: &rng)
            let bytes: [UInt8] = (0..<length).map { _ in
                rng.next() % 4 == 0 ? UInt8.random(in: 0...255, using: &rng) : alphabet.randomElement(using: &rng)!
            }
            if let value = try? JSONParser.parse(bytes) {
                accepted += 1
                // Whatever is accepted must serialize and re-parse to the same value.
                #expect((try? JSONParser.parse(value.serialized())) == value)
            }
        }
        #expect(accepted < 5000)
    }

    @Test func mutatedValidDocumentsNeverCrash() throws {
        var rng = SeededRNG(seed: 7)
        let seedDoc = Array(#"{"a":[1,-2.5e3,"h\u00e9\ud83d\udc4b",true,null,{"b":{}}],"c":"x\ny"}"#.utf8)
        for _ in 0..<5000 {
            var bytes = seedDoc
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let i = Int.random(in: 0..<bytes.count, using: &rng)
                switch rng.next() % 3 {
                case 0: bytes[i] = UInt8.random(in: 0...255, using: &rng)
                case 1: bytes.remove(at: i)
                default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: i)
                }
            }
            if let value = try? JSONParser.parse(bytes) {
                #expect(try JSONParser.parse(value.serialized()) == value)
            }
        }
    }
}

@Suite struct JSONWriterTests {
    @Test func escaping() {
        var w = JSONWriter()
        w.writeString("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é👋/")
        #expect(String(decoding: w.bytes, as: UTF8.self) == #""a\"b\\c\n\r\t\b\f\u0001\u001f"# + "\u{7f}é👋/\"")
    }

    @Test func handBuiltObject() {
        var w = JSONWriter()
        w.beginObject()
        w.key("type"); w.writeString("publish")
        w.key("timestamp"); w.writeInt(1_700_000_000)
        w.key("neg"); w.writeInt(Int.min)
        w.key("list")
        w.beginArray()
        w.writeInt(0); w.writeBool(true); w.writeNull(); w.write(["x": 1])
        w.beginArray(); w.endArray()
        w.beginObject(); w.endObject()
        w.writeRawValue(Array("\"raw\"".utf8))
        w.writeNumber(JSONNumber(text: "1.50")!)
        w.endArray()
        w.key("message"); w.write(["a": [1, 2], "b": nil])
        w.endObject()
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text == #"{"type":"publish","timestamp":1700000000,"neg":-9223372036854775808,"list":[0,true,null,{"x":1},[],{},"raw",1.50],"message":{"a":[1,2],"b":null}}"#)
        #expect((try? JSONParser.parse(w.bytes)) != nil)
    }

    /// The writer keeps its first 64 levels in bits and deeper ones in an array: commas and
    /// closing brackets must come out right on both sides of that line, on the way in and out.
    @Test func deepHandBuiltNestingAcrossTheInlineLevels() throws {
        for depth in [63, 64, 65, 130] {
            var w = JSONWriter()
            var expected = ""
            // Level i: an object {"k":<next>,"n":i} for even i, an array [<next>,i] for odd i.
            for level in 0..<depth {
                if level % 2 == 0 { w.beginObject(); w.key("k"); expected += #"{"k":"# } else { w.beginArray(); expected += "[" }
            }
            w.writeNull(); expected += "null"
            for level in (0..<depth).reversed() {
                if level % 2 == 0 {
                    w.key("n"); w.writeInt(level); w.endObject(); expected += #","n":\#(level)}"#
                } else {
                    w.writeInt(level); w.endArray(); expected += ",\(level)]"
                }
            }
            #expect(String(decoding: w.bytes, as: UTF8.self) == expected, "depth \(depth)")
        }
    }

    /// A level closed and opened again starts with no element (no comma before its first).
    @Test func aReopenedLevelStartsEmpty() {
        for outer in [1, 63, 64, 70] {
            var w = JSONWriter()
            for _ in 0..<outer { w.beginArray() }
            w.beginArray(); w.writeInt(1); w.writeInt(2); w.endArray()
            w.beginObject(); w.key("a"); w.writeInt(3); w.endObject()
            w.beginArray(); w.writeInt(4); w.endArray()
            for _ in 0..<outer { w.endArray() }
            let expected = String(repeating: "[", count: outer) + #"[1,2],{"a":3},[4]"# + String(repeating: "]", count: outer)
            #expect(String(decoding: w.bytes, as: UTF8.self) == expected, "outer \(outer)")
        }
    }

    @Test func writeRawIsVerbatim() {
        var w = JSONWriter()
        w.writeRaw("[")
        w.writeRaw([0x31])
        w.writeRaw("]")
        #expect(w.bytes == Array("[1]".utf8))
    }

    @Test func canonicalInputRoundTripsByteForByte() throws {
        let docs = [
            #"{"b":1,"a":[true,false,null],"c":{"d":"e\n\"f\"","g":1.0e+5}}"#,
            #"[1,-0,0.5,1E10,12345678901234567890,"héllo 👋","\u0001"]"#,
            #""\\""#, "[]", "{}", "null", #"{"":""}"#,
        ]
        for doc in docs {
            #expect(try parse(doc).jsonString == doc)
        }
    }

    @Test func numberConstruction() {
        #expect(JSONNumber(42).text == "42")
        #expect(JSONNumber(-7).intValue == -7)
        #expect(JSONNumber(0.1).text == "0.1")
        #expect(JSONNumber(1e-5).doubleValue == 1e-5)
        #expect(JSONNumber(1e300).doubleValue == 1e300)
        for d in [0.0, -0.0, 1.0, 1e20, 1e21, 1e-7, 123.456, .leastNonzeroMagnitude, .greatestFiniteMagnitude] {
            #expect(JSONNumber(text: JSONNumber(d).text) != nil, "\(d)")
            #expect(JSONNumber(d).doubleValue == d)
        }
        #expect(JSONNumber(text: "01") == nil)
        #expect(JSONNumber(text: " 1") == nil)
        #expect(JSONNumber(text: "1 ") == nil)
        #expect(JSONNumber(text: "") == nil)
        #expect(JSONNumber(text: "-1.5e-3")?.doubleValue == -0.0015)
    }

    @Test func literalsAndAccessors() {
        let v: JSONValue = ["name": "Luke", "age": 19, "pi": 3.5, "ok": true, "none": nil, "list": [1, "two"]]
        #expect(v["name"]?.stringValue == "Luke")
        #expect(v["age"]?.intValue == 19)
        #expect(v["pi"]?.doubleValue == 3.5)
        #expect(v["ok"]?.boolValue == true)
        #expect(v["none"]?.isNull == true)
        #expect(v["list"]?.arrayValue == [1, "two"])
        #expect(v.jsonString == #"{"name":"Luke","age":19,"pi":3.5,"ok":true,"none":null,"list":[1,"two"]}"#)
        #expect(JSONValue.string("x")["a"] == nil)
        #expect(JSONValue.string("x").intValue == nil)
    }

    @Test func objectMutation() {
        var o: JSONObject = ["a": 1, "b": 2]
        o["a"] = 3
        o["c"] = 4
        #expect(o.keys == ["a", "b", "c"])
        #expect(o["a"] == 3)
        o["b"] = nil
        #expect(o.keys == ["a", "c"])
        o.append(key: "a", value: 5)
        #expect(o["a"] == 5)
        #expect(o.count == 3)
        #expect(o.map(\.key) == ["a", "c", "a"])
        let fromPairs = JSONObject([("x", JSONValue.null)])
        #expect(JSONValue.object(fromPairs).jsonString == #"{"x":null}"#)
        #expect(JSONObject(["k": true] as KeyValuePairs).first?.value == true)
    }
}

// MARK: Property test: random values round-trip

private func randomString(_ rng: inout SeededRNG) -> String {
    let pool: [String] = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1f}", "é", "€", "👋", "日", "\u{2028}", "\u{FEFF}", "\u{10FFFF}", ":", "{", "]"]
    let n = Int.random(in: 0..<8, using: &rng)
    return (0..<n).map { _ in pool.randomElement(using: &rng)! }.joined()
}

private func randomNumber(_ rng: inout SeededRNG) -> JSONNumber {
    switch rng.next() % 4 {
    case 0: return JSONNumber(Int(bitPattern: UInt(rng.next())))
    case 1: return JSONNumber(Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF) * (rng.next() % 2 == 0 ? 1 : -1))
    case 2: return JSONNumber(Int.random(in: -100...100, using: &rng))
    default:
        let texts = ["0", "-0", "1.50", "1e400", "-2E-3", "123456789012345678901234567890", "0.000"]
        return JSONNumber(text: texts.randomElement(using: &rng)!)!
    }
}

private func randomValue(_ rng: inout SeededRNG, depth: Int) -> JSONValue {
    let kind = depth > 5 ? rng.next() % 4 : rng.next() % 6
    switch kind {
    case 0: return .null
    case 1: return .bool(rng.next() % 2 == 0)
    case 2: return .number(randomNumber(&rng))
    case 3: return .string(randomString(&rng))
    case 4: return .array((0..<Int.random(in: 0..<5, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
    default:
        var o = JSONObject()
        for _ in 0..<Int.random(in: 0..<5, using: &rng) {
            o.append(key: randomString(&rng), value: randomValue(&rng, depth: depth + 1))
        }
        return .object(o)
    }
}

@Suite struct JSONRoundTripTests {
    @Test func randomValuesRoundTrip() throws {
        var rng = SeededRNG(seed: 2026)
        for _ in 0..<2000 {
            let value = randomValue(&rng, depth: 0)
            let bytes = value.serialized()
            let reparsed = try JSONParser.parse(bytes)
            #expect(reparsed == value)
            #expect(reparsed.serialized() == bytes)
        }
    }

    @Test func randomValuesAgreeWithFoundation() throws {
        var rng = SeededRNG(seed: 99)
        for _ in 0..<300 {
            let value = randomValue(&rng, depth: 0)
            // Foundation rejects 1e400 and drops U+FEFF inside strings; neither is ours to judge.
            let text = value.jsonString
            guard !hasDuplicateKeys(value), !text.contains("1e400"), !text.unicodeScalars.contains("\u{FEFF}")
            else { continue }
            let foundation = try JSONSerialization.jsonObject(with: Data(value.serialized()), options: [.fragmentsAllowed])
            #expect(equivalent(value, foundation), "\(value)")
        }
    }

    @Test func handPickedDocumentsAgreeWithFoundation() throws {
        let docs = [
            ##"{"name":"Luke","color":"#ff0000","tags":["a","b"],"n":-12.5e2,"ok":true,"x":null}"##,
            #"["\ud83d\udc4b","\u00e9\u0000",0,1e3,[[[]]],{}]"#,
            #"  {"nested": {"deeper": {"list": [1, 2, {"k": "v"}]}}}  "#,
            #""just a string with \"quotes\" and \\ backslashes""#,
        ]
        for doc in docs {
            let mine = try JSONParser.parse(doc)
            let theirs = try JSONSerialization.jsonObject(with: Data(doc.utf8), options: [.fragmentsAllowed])
            #expect(equivalent(mine, theirs), "\(doc)")
            // And Foundation reads our output the same way.
            let again = try JSONSerialization.jsonObject(with: Data(mine.serialized()), options: [.fragmentsAllowed])
            #expect(equivalent(mine, again), "\(doc)")
        }
    }
}

private func hasDuplicateKeys(_ v: JSONValue) -> Bool {
    switch v {
    case .array(let a): return a.contains(where: hasDuplicateKeys)
    case .object(let o): return Set(o.keys).count != o.count || o.values.contains(where: hasDuplicateKeys)
    default: return false
    }
}

private func equivalent(_ v: JSONValue, _ any: Any) -> Bool {
    switch v {
    case .null: return any is NSNull
    case .bool(let b): return (any as? NSNumber)?.boolValue == b
    case .number(let n):
        guard let number = any as? NSNumber else { return false }
        let d = n.doubleValue
        if d.isInfinite { return true }  // Foundation's handling of out-of-range literals varies
        if let i = n.intValue { return number.int64Value == Int64(i) || number.doubleValue == Double(i) }
        return number.doubleValue == d || abs(number.doubleValue - d) <= abs(d) * 1e-9
    case .string(let s): return (any as? String) == s
    case .array(let a):
        guard let other = any as? [Any], other.count == a.count else { return false }
        return zip(a, other).allSatisfy { equivalent($0, $1) }
    case .object(let o):
        guard let other = any as? [String: Any], other.count == o.count else { return false }
        return o.allSatisfy { key, value in other[key].map { equivalent(value, $0) } ?? false }
    }
}

/// The word-at-a-time string scans (``JSONBytes``) against the byte-by-byte rule: every byte
/// value at every place of a word, and strings with a special byte at every offset around the
/// eight-byte steps.
@Suite struct JSONWordScanTests {
    static func word(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }

    @Test func everyByteAtEveryPlaceIsSeen() {
        for place in 0..<8 {
            for value in 0...255 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
                bytes[place] = UInt8(value)
                let b = UInt8(value)
                let escape = b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\")
                #expect(JSONBytes.needsEscape(Self.word(bytes)) == escape, "byte \(value) at \(place)")
                #expect(JSONBytes.needsLook(Self.word(bytes)) == (escape || b >= 0x80), "byte \(value) at \(place)")
            }
        }
        // Words of bytes that each pass, next to ones that borrow: none is taken for another.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let bytes = (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let escape = bytes.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
            #expect(JSONBytes.needsEscape(Self.word(bytes)) == escape, "\(bytes)")
            #expect(JSONBytes.needsLook(Self.word(bytes)) == (escape || bytes.contains { $0 >= 0x80 }), "\(bytes)")
        }
    }

    @Test func stringsWithASpecialByteAtEveryOffsetRoundTrip() throws {
        for special in ["\"", "\\", "\n", "\u{01}", "é", "😀", "\u{7F}"] {
            for offset in 0..<20 {
                for length in [offset + 1, offset + 9, 40] {
                    var text = String(repeating: "x", count: offset) + special
                    text += String(repeating: "y", count: max(0, length - offset - 1))
                    var w = JSONWriter()
                    w.write(.string(text))
                    #expect(try JSONParser.parse(w.bytes) == .string(text), "\(special.debugDescription) at \(offset)")
                }
            }
        }
        // A control character in a long run is still refused, wherever it is.
        for offset in 0..<20 {
            let raw = Array("\"".utf8) + [UInt8](repeating: UInt8(ascii: "z"), count: offset) + [0x07] + Array("zz\"".utf8)
            #expect(throws: JSONParseError.self) { try JSONParser.parse(raw) }
        }
        // Invalid UTF-8 after a run of plain bytes is still refused.
        for offset in 0..<20 {
            let raw = Array("\"".utf8) + [UInt8](repeating: UInt8(ascii: "z"), count: offset) + [0xC0, 0x80] + Array("\"".utf8)
            #expect(throws: JSONParseError.self) { try JSONParser.parse(raw) }
        }
    }
}
