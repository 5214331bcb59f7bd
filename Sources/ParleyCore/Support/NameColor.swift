/// A stable `#RRGGBB` color for a name, so the same person looks the same on every client.
public enum NameColor {
    public static func color(for name: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let hue = Double(hash % 360)
        return hex(hue: hue, saturation: 0.65, lightness: 0.45)
    }

    static func hex(hue: Double, saturation s: Double, lightness l: Double) -> String {
        let c = (1 - abs(2 * l - 1)) * s
        let h = hue / 60
        let x = c * (1 - abs(h.truncatingRemainder(dividingBy: 2) - 1))
        let (r, g, b): (Double, Double, Double) = switch Int(h) {
        case 0: (c, x, 0)
        case 1: (x, c, 0)
        case 2: (0, c, x)
        case 3: (0, x, c)
        case 4: (x, 0, c)
        default: (c, 0, x)
        }
        let m = l - c / 2
        let digits = Array("0123456789ABCDEF")
        var out = "#"
        for component in [r, g, b] {
            let v = Int(((component + m) * 255).rounded())
            out.append(digits[v / 16])
            out.append(digits[v % 16])
        }
        return out
    }
}
