/// The tutorials' random identity: an adjective and a noun run together ("hiddensun") and a
/// random `#RRGGBB` color.
public enum RandomIdentity {
    /// The adjectives of the Scaledrone chat tutorials.
    public static let adjectives = [
        "autumn", "hidden", "bitter", "misty", "silent", "empty", "dry", "dark", "summer", "icy",
        "delicate", "quiet", "white", "cool", "spring", "winter", "patient", "twilight", "dawn",
        "crimson", "wispy", "weathered", "blue", "billowing", "broken", "cold", "damp", "falling",
        "frosty", "green", "long", "late", "lingering", "bold", "little", "morning", "muddy", "old",
        "red", "rough", "still", "small", "sparkling", "shy", "wandering", "withered", "wild",
        "black", "young", "holy", "solitary", "fragrant", "aged", "snowy", "proud", "floral",
        "restless", "divine", "polished", "ancient", "purple", "lively", "nameless",
    ]
    /// The nouns of the Scaledrone chat tutorials.
    public static let nouns = [
        "waterfall", "river", "breeze", "moon", "rain", "wind", "sea", "morning", "snow", "lake",
        "sunset", "pine", "shadow", "leaf", "dawn", "glitter", "forest", "hill", "cloud", "meadow",
        "sun", "glade", "bird", "brook", "butterfly", "bush", "dew", "dust", "field", "fire",
        "flower", "firefly", "feather", "grass", "haze", "mountain", "night", "pond", "darkness",
        "snowflake", "silence", "sound", "sky", "shape", "surf", "thunder", "violet", "water",
        "wildflower", "wave", "resonance", "wood", "dream", "cherry", "tree", "fog", "frost",
        "voice", "paper", "frog", "smoke", "star",
    ]

    /// A random name such as "hiddensun".
    public static func name<R: RandomNumberGenerator>(using generator: inout R) -> String {
        adjectives.randomElement(using: &generator)! + nouns.randomElement(using: &generator)!
    }

    /// A random name such as "hiddensun".
    public static func name() -> String {
        var generator = SystemRandomNumberGenerator()
        return name(using: &generator)
    }

    /// A random color `#RRGGBB` (uppercase hex, always six digits).
    public static func color<R: RandomNumberGenerator>(using generator: inout R) -> String {
        let value = Int.random(in: 0...0xFFFFFF, using: &generator)
        let hex = String(value, radix: 16, uppercase: true)
        return "#" + String(repeating: "0", count: 6 - hex.count) + hex
    }

    /// A random color `#RRGGBB`.
    public static func color() -> String {
        var generator = SystemRandomNumberGenerator()
        return color(using: &generator)
    }

    /// Whether `text` is `#RRGGBB`.
    public static func isHexColor(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        return utf8.count == 7 && utf8[0] == UInt8(ascii: "#") && utf8[1...].allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102)
        }
    }

    /// The red, green and blue components of a `#RRGGBB` color.
    public static func rgb(_ color: String) -> (red: Int, green: Int, blue: Int)? {
        guard isHexColor(color), let value = Int(color.dropFirst(), radix: 16) else { return nil }
        return (value >> 16, (value >> 8) & 0xFF, value & 0xFF)
    }
}
