/// How a line looks: human-readable text or one JSON object per line.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-05-01T12:00:00.123Z info  parley: listening door=http address=127.0.0.1:8080`
    case text
    /// `{"time":"2026-05-01T12:00:00.123Z","level":"info","logger":"parley","msg":"listening","door":"http",...}`
    case json

    /// The line for `record`, ending in a newline. Control characters in the message and the
    /// values are escaped, so whatever a client sent cannot start a line of its own.
    public func render(_ record: LogRecord) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + record.message.utf8.count)
        switch self {
        case .text: LogFormat.renderText(record, into: &out)
        case .json: LogFormat.renderJSON(record, into: &out)
        }
        out.append(0x0A)
        return out
    }

    // MARK: text

    private static func renderText(_ record: LogRecord, into out: inout [UInt8]) {
        appendTimestamp(record.timestampMillis, into: &out)
        out.append(0x20)
        let level = record.level.description
        out.append(contentsOf: level.utf8)
        for _ in level.utf8.count..<5 { out.append(0x20) }
        out.append(0x20)
        out.append(contentsOf: record.label.utf8)
        out.append(contentsOf: ": ".utf8)
        appendEscaped(record.message, into: &out, quoteSpecials: false)
        for (key, value) in record.metadata {
            out.append(0x20)
            appendEscaped(key, into: &out, quoteSpecials: false)
            out.append(UInt8(ascii: "="))
            switch value {
            case .string(let text): appendTextValue(text, into: &out)
            default: out.append(contentsOf: value.description.utf8)
            }
        }
    }

    /// A value as is when it is a plain word, else in double quotes with `"` and `\` escaped.
    private static func appendTextValue(_ text: String, into out: inout [UInt8]) {
        let plain = !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 != 0x22 && $0 != 0x3D && $0 != 0x5C && $0 != 0x7F }
        if plain {
            out.append(contentsOf: text.utf8)
        } else {
            out.append(0x22)
            appendEscaped(text, into: &out, quoteSpecials: true)
            out.append(0x22)
        }
    }

    /// Copies `text`, escaping control characters (`\n`, `\t`, `\u{1b}` …) and, inside
    /// quotes, `"` and `\`.
    private static func appendEscaped(_ text: String, into out: inout [UInt8], quoteSpecials: Bool) {
        for byte in text.utf8 {
            switch byte {
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0x22 where quoteSpecials: out.append(contentsOf: #"\""#.utf8)
            case 0x5C where quoteSpecials: out.append(contentsOf: #"\\"#.utf8)
            case 0..<0x20, 0x7F: appendUnicodeEscape(byte, into: &out)
            default: out.append(byte)
            }
        }
    }

    // MARK: JSON

    private static let reservedKeys: Set<String> = ["time", "level", "logger", "msg"]

    private static func renderJSON(_ record: LogRecord, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"time":""#.utf8)
        appendTimestamp(record.timestampMillis, into: &out)
        out.append(contentsOf: #"","level":"#.utf8)
        appendJSONString(record.level.description, into: &out)
        out.append(contentsOf: #","logger":"#.utf8)
        appendJSONString(record.label, into: &out)
        out.append(contentsOf: #","msg":"#.utf8)
        appendJSONString(record.message, into: &out)
        for (key, value) in record.metadata {
            out.append(0x2C)
            appendJSONString(reservedKeys.contains(key) ? "meta_" + key : key, into: &out)
            out.append(0x3A)
            switch value {
            case .string(let text): appendJSONString(text, into: &out)
            case .int(let number): out.append(contentsOf: String(number).utf8)
            case .double(let number): out.append(contentsOf: (number.isFinite ? String(number) : "null").utf8)
            case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
            }
        }
        out.append(0x7D)
    }

    static func appendJSONString(_ text: String, into out: inout [UInt8]) {
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: out.append(contentsOf: #"\""#.utf8)
            case 0x5C: out.append(contentsOf: #"\\"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20, 0x7F: appendUnicodeEscape(byte, into: &out)
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }

    private static func appendUnicodeEscape(_ byte: UInt8, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(contentsOf: #"\u00"#.utf8)
        out.append(hex[Int(byte >> 4)])
        out.append(hex[Int(byte & 0xF)])
    }

    // MARK: time

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC), without the C library's time zone machinery.
    static func appendTimestamp(_ millis: Int64, into out: inout [UInt8]) {
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let milli = Int(millis - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        func two(_ n: Int) { out.append(UInt8(48 + n / 10)); out.append(UInt8(48 + n % 10)) }
        let y = Int(year)
        out.append(contentsOf: String(y).utf8)
        out.append(0x2D); two(month)
        out.append(0x2D); two(day)
        out.append(UInt8(ascii: "T")); two(secondOfDay / 3600)
        out.append(0x3A); two(secondOfDay / 60 % 60)
        out.append(0x3A); two(secondOfDay % 60)
        out.append(0x2E)
        out.append(UInt8(48 + milli / 100)); out.append(UInt8(48 + milli / 10 % 10)); out.append(UInt8(48 + milli % 10))
        out.append(UInt8(ascii: "Z"))
    }

    /// Year, month, day of the day `days` after 1970-01-01 (Howard Hinnant's algorithm).
    static func civil(fromDays days: Int64) -> (Int64, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
