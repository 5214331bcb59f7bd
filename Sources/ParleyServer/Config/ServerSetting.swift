import Foundation
import ParleyCore

/// One setting of `parley serve`: its flag, environment variable and config-file path, the
/// rule its value obeys, its default, whether a reload may change it, and the
/// ``ServerConfiguration`` property it lands in. ``ServerSetting/table`` lists them all;
/// parsing, `--help`, config-file validation, the reload diff and the README's option table
/// are made from that list, so a rule cannot differ between a flag and the file.
struct ServerSetting: Sendable {
    /// `--max-rooms`; nil for a setting only the config file sets.
    let flag: String?
    /// The value's placeholder in `--help` (`BYTES`, `N`); empty for a switch.
    let placeholder: String
    /// The dotted config-file path (`doors.native.max_rooms`); nil for `--config` itself.
    let path: String?
    /// Older config-file keys that still set it (`limits.nativeMaxRooms`).
    let aliases: [String]
    /// What it does, in a few words (`--help` and the README).
    let help: String
    /// More for the README only.
    let more: String?
    /// A reload (SIGHUP) may change it; otherwise the running value stays until a restart.
    let reloadable: Bool
    /// What values it takes, in words: `a whole number in 1...100000`.
    let accepts: String
    /// The default, as the README and `--help` show it.
    let defaultText: String
    /// Sets the value from a flag's or variable's text, or from the file's JSON; `name` is
    /// the flag, variable or key path to name in an error.
    let apply: @Sendable (inout ServerConfiguration, Input, _ name: String) throws(ServerConfiguration.UsageError) -> Void
    let differs: @Sendable (ServerConfiguration, ServerConfiguration) -> Bool
    /// Copies the setting from the second configuration into the first (a reload keeping it).
    let keep: @Sendable (inout ServerConfiguration, ServerConfiguration) -> Void
    /// Whether the setting lands in this property.
    let landsIn: @Sendable (AnyKeyPath) -> Bool

    enum Input {
        case text(String)
        case json(JSONValue)
    }

    /// `PARLEY_` and the flag in capitals: `--max-rooms` is `PARLEY_MAX_ROOMS`.
    var environment: String? {
        flag.map { "PARLEY_" + String($0.dropFirst(2)).uppercased().replacingOccurrences(of: "-", with: "_") }
    }

    /// A switch takes no value on the command line.
    var isSwitch: Bool { flag != nil && placeholder.isEmpty }

    /// The config-file paths it answers to, the documented one first.
    var paths: [String] { (path.map { [$0] } ?? []) + aliases }

    /// What a person calls it in messages: the flag, else the config-file path.
    var name: String { flag ?? path ?? "?" }

    init<Value: Equatable & Sendable>(
        _ flag: String?, _ placeholder: String = "", path: String?, aliases: [String] = [],
        _ field: WritableKeyPath<ServerConfiguration, Value> & Sendable, _ rule: SettingRule<Value>,
        reloadable: Bool = true, defaultText: String? = nil, help: String, more: String? = nil
    ) {
        self.init(flag, placeholder, path: path, aliases: aliases, field, rule, burstField: nil,
                  reloadable: reloadable, defaultText: defaultText, help: help, more: more)
    }

    /// A rate whose burst is twice itself unless a burst row sets it.
    init(
        _ flag: String?, _ placeholder: String = "", path: String?, aliases: [String] = [],
        _ field: WritableKeyPath<ServerConfiguration, Double> & Sendable, _ rule: SettingRule<Double>,
        burst: WritableKeyPath<ServerConfiguration, Double> & Sendable,
        reloadable: Bool = true, help: String, more: String? = nil
    ) {
        self.init(flag, placeholder, path: path, aliases: aliases, field, rule, burstField: burst,
                  reloadable: reloadable, defaultText: nil, help: help, more: more)
    }

    private init<Value: Equatable & Sendable>(
        _ flag: String?, _ placeholder: String, path: String?, aliases: [String],
        _ field: WritableKeyPath<ServerConfiguration, Value> & Sendable, _ rule: SettingRule<Value>,
        burstField burst: (WritableKeyPath<ServerConfiguration, Double> & Sendable)?,
        reloadable: Bool, defaultText: String?, help: String, more: String?
    ) {
        self.flag = flag
        self.placeholder = placeholder
        self.path = path
        self.aliases = aliases
        self.help = help
        self.more = more
        self.reloadable = reloadable
        self.accepts = rule.accepts
        let shown = defaultText ?? rule.show(ServerConfiguration()[keyPath: field])
        self.defaultText = burst == nil ? shown : "\(shown), burst 2x"
        self.apply = { configuration, input, name throws(ServerConfiguration.UsageError) in
            let value: Value
            switch input {
            case .text(let text): value = try rule.text(text, name)
            case .json(let json): value = try rule.json(json, name)
            }
            configuration[keyPath: field] = value
            // A rate sets its burst to twice itself (at least 1); a burst row after it in the
            // table may set it apart.
            if let burst, let rate = value as? Double { configuration[keyPath: burst] = max(1, rate * 2) }
        }
        self.differs = { old, new in
            old[keyPath: field] != new[keyPath: field] || burst.map { old[keyPath: $0] != new[keyPath: $0] } ?? false
        }
        self.keep = { merged, running in
            merged[keyPath: field] = running[keyPath: field]
            if let burst { merged[keyPath: burst] = running[keyPath: burst] }
        }
        self.landsIn = { $0 == field || (burst.map { $0 as AnyKeyPath } == $0) }
    }

    /// `--config FILE`: read before everything else by ``ServerConfiguration/parse(arguments:environment:)``.
    private init(configFlag flag: String) {
        self.flag = flag
        placeholder = "FILE"
        path = nil
        aliases = []
        help = "JSON config file: channels, secrets, limits, TLS, any setting below"
        more = nil
        reloadable = true
        accepts = "a file path"
        defaultText = "off"
        apply = { _, _, _ throws(ServerConfiguration.UsageError) in }
        differs = { _, _ in false }
        keep = { _, _ in }
        landsIn = { _ in false }
    }

    static func configFile(_ flag: String) -> ServerSetting { ServerSetting(configFlag: flag) }

    /// The flag of the setting that lands in `field` (for messages that name it).
    static func flag(of field: AnyKeyPath) -> String {
        table.first { $0.landsIn(field) }?.name ?? "?"
    }
}

/// How a value is read from text (a flag or variable) and from JSON (the config file): one
/// rule for both, one wording of what it accepts.
struct SettingRule<Value: Equatable & Sendable>: Sendable {
    typealias UsageError = ServerConfiguration.UsageError
    let accepts: String
    let text: @Sendable (String, _ name: String) throws(UsageError) -> Value
    let json: @Sendable (JSONValue, _ name: String) throws(UsageError) -> Value
    let show: @Sendable (Value) -> String

    /// `NAME must be ACCEPTS, got "TEXT"` (text) / `NAME must be ACCEPTS` (config file).
    static func refusal(_ name: String, _ accepts: String, got text: String? = nil) -> UsageError {
        UsageError(description: "\(name) must be \(accepts)" + (text.map { ", got \"\($0)\"" } ?? ""))
    }

    /// One check for both inputs: `text` and `json` turn the input into a candidate (nil:
    /// not even of the right kind), `check` accepts it or says why not (nil: the generic refusal).
    init(accepts: String,
         text: @escaping @Sendable (String) -> Value?,
         json: @escaping @Sendable (JSONValue) -> Value?,
         check: @escaping @Sendable (Value, _ name: String) throws(UsageError) -> Bool = { _, _ in true },
         show: @escaping @Sendable (Value) -> String) {
        self.accepts = accepts
        self.text = { input, name throws(UsageError) in
            guard let value = text(input), try check(value, name) else { throw Self.refusal(name, accepts, got: input) }
            return value
        }
        self.json = { input, name throws(UsageError) in
            guard let value = json(input), try check(value, name) else { throw Self.refusal(name, accepts) }
            return value
        }
        self.show = show
    }

    init(accepts: String,
         text: @escaping @Sendable (String, _ name: String) throws(UsageError) -> Value,
         json: @escaping @Sendable (JSONValue, _ name: String) throws(UsageError) -> Value,
         show: @escaping @Sendable (Value) -> String) {
        self.accepts = accepts
        self.text = text
        self.json = json
        self.show = show
    }

    /// The same rule, its value wrapped (an optional, a Double count, ...).
    func map<Other>(_ forward: @escaping @Sendable (Value) -> Other, show: @escaping @Sendable (Other) -> String) -> SettingRule<Other> {
        let text = self.text, json = self.json
        return SettingRule<Other>(accepts: accepts,
                                  text: { input, name throws(UsageError) in forward(try text(input, name)) },
                                  json: { input, name throws(UsageError) in forward(try json(input, name)) },
                                  show: show)
    }

    var optional: SettingRule<Value?> {
        let show = self.show
        return map({ $0 }, show: { $0.map(show) ?? "" })
    }
}

extension SettingRule where Value == Int {
    static func integer(_ range: ClosedRange<Int>) -> SettingRule {
        SettingRule(accepts: "a whole number in \(range.lowerBound)...\(range.upperBound)",
                    text: { Int($0) }, json: { $0.intValue },
                    check: { value, _ in range.contains(value) }, show: { String($0) })
    }

    static let port = integer(0...65535)
}

extension SettingRule where Value == Double {
    /// A number (fractions allowed), e.g. a rate per second.
    static func number(_ range: ClosedRange<Double>) -> SettingRule {
        SettingRule(accepts: "a number in \(format(range.lowerBound))...\(format(range.upperBound))",
                    text: { Double($0) }, json: { $0.doubleValue },
                    check: { value, _ in value.isFinite && range.contains(value) }, show: format)
    }

    /// A whole number kept as a Double (a factor or a rate taken in whole units).
    static func count(_ range: ClosedRange<Int>) -> SettingRule {
        SettingRule<Int>.integer(range).map(Double.init, show: format)
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}

extension SettingRule where Value == UInt64 {
    /// Whole milliseconds.
    static func milliseconds(_ range: ClosedRange<Int>) -> SettingRule {
        SettingRule<Int>.integer(range).map { UInt64($0) } show: { String($0) }
    }

    /// Seconds (fractions allowed, up to a year), held as milliseconds.
    static func seconds(allowZero: Bool) -> SettingRule {
        let limit = 86_400.0 * 365
        let accepts = "a number of seconds \(allowZero ? "(0 or more)" : "above 0") up to \(Int(limit))"
        return SettingRule<Double>(accepts: accepts, text: { Double($0) }, json: { $0.doubleValue },
                                   check: { s, _ in s.isFinite && (s > 0 || (allowZero && s == 0)) && s <= limit },
                                   show: SettingRule<Double>.format)
            .map({ UInt64(($0 * 1000).rounded()) }, show: { SettingRule<Double>.format(Double($0) / 1000) })
    }
}

extension SettingRule where Value == Bool {
    /// A switch: the flag alone, or `1`/`0` (also `true`/`false`, `yes`/`no`); in the file,
    /// `true` or `false`.
    static let toggle = SettingRule(
        accepts: "true or false (flag alone, 1 or 0)",
        text: { input, name throws(UsageError) in
            switch input {
            case "", "1", "true", "yes": return true
            case "0", "false", "no": return false
            default: throw UsageError(description: "\(name) takes no value (or 1 or 0), got \"\(input)\"")
            }
        },
        json: { input, name throws(UsageError) in
            guard let value = input.boolValue else { throw UsageError(description: "\(name) must be true or false") }
            return value
        },
        show: { $0 ? "on" : "off" })
}

extension SettingRule where Value == String {
    /// A string that `valid` accepts (every string but the empty one, by default).
    static func string(_ accepts: String, _ valid: @escaping @Sendable (String) -> Bool = { !$0.isEmpty }) -> SettingRule {
        SettingRule(accepts: accepts, text: { $0 }, json: { $0.stringValue },
                    check: { value, _ in valid(value) }, show: { $0 })
    }

    /// A string checked (and maybe normalised) by a validator that words its own refusal.
    static func validated(_ accepts: String,
                          _ validate: @escaping @Sendable (String, _ name: String) throws(UsageError) -> String) -> SettingRule {
        SettingRule(accepts: accepts,
                    text: { input, name throws(UsageError) in try validate(input, name) },
                    json: { input, name throws(UsageError) in
                        guard let text = input.stringValue, !text.isEmpty else { throw refusal(name, accepts) }
                        return try validate(text, name)
                    },
                    show: { $0 })
    }
}

extension SettingRule where Value == [String] {
    /// A list: comma-separated on the command line, an array of strings in the file, each
    /// list checked (and normalised) by `validate`.
    static func list(_ accepts: String,
                     _ validate: @escaping @Sendable ([String], _ name: String) throws(UsageError) -> [String]) -> SettingRule {
        SettingRule(accepts: accepts,
                    text: { input, name throws(UsageError) in
                        try validate(input.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, name)
                    },
                    json: { input, name throws(UsageError) in
                        guard let items = input.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                            throw UsageError(description: "\(name) must be an array of strings")
                        }
                        return try validate(items.compactMap(\.stringValue), name)
                    },
                    show: { $0.isEmpty ? "none" : $0.joined(separator: ",") })
    }
}

extension SettingRule {
    /// One of a few words (`full|normal`, a log level).
    static func choice(_ accepts: String, _ parse: @escaping @Sendable (String) -> Value?, show: @escaping @Sendable (Value) -> String) -> SettingRule {
        SettingRule(accepts: accepts, text: parse, json: { $0.stringValue.flatMap(parse) }, show: show)
    }
}

extension ServerSetting {
    /// The README's option table, one row per setting (README.md, "`parley serve` options";
    /// `SettingsTableTests` keeps the two the same).
    static var markdownTable: String {
        func cell(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }
        func code(_ text: String) -> String { "`\(cell(text))`" }
        var lines = ["| flag | env | config file | default | accepts | reload | meaning |",
                     "| --- | --- | --- | --- | --- | --- | --- |"]
        for setting in table {
            let flag = setting.flag.map { code(setting.placeholder.isEmpty ? $0 : "\($0) \(setting.placeholder)") } ?? ""
            let env = setting.environment.map(code) ?? ""
            var file = setting.path.map(code) ?? ""
            if !setting.aliases.isEmpty { file += " (or " + setting.aliases.map(code).joined(separator: ", ") + ")" }
            let meaning = cell(setting.help) + (setting.more.map { "; " + $0 } ?? "")
            let reload = setting.path == nil ? "" : setting.reloadable ? "yes" : "restart"
            lines.append("| \(flag) | \(env) | \(file) | \(cell(setting.defaultText)) | \(cell(setting.accepts)) | \(reload) | \(meaning) |")
        }
        return lines.joined(separator: "\n")
    }
}
