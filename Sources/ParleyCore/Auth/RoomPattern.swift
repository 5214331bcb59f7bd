/// A room-name regular expression from a token's `permissions`, matched against the WHOLE
/// room name in time linear in the name's length (a Thompson NFA: no backtracking, so no
/// pattern can hang the server).
///
/// Supported: literals, `.`, `[...]` / `[^...]` classes with ranges, `\d \w \s` and escaped
/// characters, groups `(...)` and `(?:...)`, alternation `|`, quantifiers `* + ?` and `{m}`,
/// `{m,}`, `{m,n}` (bounded repeats expand; the expanded program and the work of compiling
/// it are capped, so nested repeats cannot multiply into a hang). `^` at the start
/// and `$` at the end are accepted and redundant (matching is always anchored).
public struct RoomPattern: Sendable, Hashable {
    public let source: String
    private let program: [Instruction]

    /// Longest pattern accepted, in characters.
    public static let maxLength = 256
    /// Largest compiled program (bounded repeats expand into copies).
    static let maxInstructions = 4096
    /// Most steps (pattern parts visited) compiling may take. Nested repeats multiply their
    /// counts, and a part can emit nothing (`()`, `a{0}`), so the program's size alone does
    /// not bound the work: `(){9999}{9999}{9999}` emits no instruction in 10^12 steps.
    static let maxCompileSteps = 4 * maxInstructions

    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public init(_ source: String) throws(SyntaxError) {
        guard source.count <= Self.maxLength else {
            throw SyntaxError(message: "room pattern longer than \(Self.maxLength) characters")
        }
        self.source = source
        var parser = Parser(Array(source.unicodeScalars))
        let node = try parser.parseWhole()
        var compiler = Compiler()
        try compiler.emit(node)
        compiler.program.append(.match)
        program = compiler.program
    }

    public static func == (a: RoomPattern, b: RoomPattern) -> Bool { a.source == b.source }
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }

    /// True when the whole of `name` matches.
    public func matches(_ name: String) -> Bool {
        var current = Set<Int>()
        addThread(0, to: &current)
        for scalar in name.unicodeScalars {
            var next = Set<Int>()
            for pc in current {
                if case .consume(let set) = program[pc], set.contains(scalar) { addThread(pc + 1, to: &next) }
            }
            if next.isEmpty { return false }
            current = next
        }
        return current.contains { if case .match = program[$0] { return true } else { return false } }
    }

    private func addThread(_ pc: Int, to set: inout Set<Int>) {
        var stack = [pc]
        while let pc = stack.popLast() {
            guard set.insert(pc).inserted else { continue }
            switch program[pc] {
            case .jump(let target): stack.append(target)
            case .split(let a, let b): stack.append(b); stack.append(a)
            case .consume, .match: break
            }
        }
    }

    // MARK: program

    enum Instruction: Sendable {
        case consume(ScalarSet)
        case jump(Int)
        case split(Int, Int)
        case match
    }

    struct ScalarSet: Sendable {
        var ranges: [ClosedRange<UInt32>]
        var negated = false
        static let any = ScalarSet(ranges: [0...0x10FFFF])
        func contains(_ scalar: Unicode.Scalar) -> Bool {
            let hit = ranges.contains { $0.contains(scalar.value) }
            return hit != negated
        }
    }

    indirect enum Node {
        case set(ScalarSet)
        case sequence([Node])
        case alternation([Node])
        case repeated(Node, min: Int, max: Int?)
        case empty
    }

    struct Parser {
        let scalars: [Unicode.Scalar]
        var index = 0
        init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

        var atEnd: Bool { index >= scalars.count }
        func peek() -> Unicode.Scalar? { atEnd ? nil : scalars[index] }

        mutating func parseWhole() throws(SyntaxError) -> Node {
            if peek() == "^" { index += 1 }
            let node = try parseAlternation()
            if peek() == "$" { index += 1 }
            guard atEnd else { throw SyntaxError(message: "unexpected \"\(scalars[index])\" at \(index) in room pattern") }
            return node
        }

        mutating func parseAlternation() throws(SyntaxError) -> Node {
            var branches = [try parseSequence()]
            while peek() == "|" {
                index += 1
                branches.append(try parseSequence())
            }
            return branches.count == 1 ? branches[0] : .alternation(branches)
        }

        mutating func parseSequence() throws(SyntaxError) -> Node {
            var items: [Node] = []
            while let c = peek(), c != "|", c != ")" {
                if c == "$" && index == scalars.count - 1 { break }
                var atom = try parseAtom()
                while let q = peek(), q == "*" || q == "+" || q == "?" || q == "{" {
                    switch q {
                    case "*": index += 1; atom = .repeated(atom, min: 0, max: nil)
                    case "+": index += 1; atom = .repeated(atom, min: 1, max: nil)
                    case "?": index += 1; atom = .repeated(atom, min: 0, max: 1)
                    default:
                        let (min, max) = try parseBraces()
                        atom = .repeated(atom, min: min, max: max)
                    }
                }
                items.append(atom)
            }
            return items.isEmpty ? .empty : (items.count == 1 ? items[0] : .sequence(items))
        }

        mutating func parseBraces() throws(SyntaxError) -> (Int, Int?) {
            index += 1  // {
            func number(_ parser: inout Parser) -> Int? {
                var digits = ""
                while let c = parser.peek(), c.properties.numericType == .decimal, digits.count < 4 {
                    digits.unicodeScalars.append(c)
                    parser.index += 1
                }
                return Int(digits)
            }
            guard let min = number(&self) else { throw SyntaxError(message: "bad {m,n} repeat in room pattern") }
            var max: Int? = min
            if peek() == "," {
                index += 1
                max = number(&self)
            }
            guard peek() == "}" else { throw SyntaxError(message: "bad {m,n} repeat in room pattern") }
            index += 1
            if let max, max < min { throw SyntaxError(message: "bad {m,n} repeat in room pattern") }
            return (min, max)
        }

        mutating func parseAtom() throws(SyntaxError) -> Node {
            let c = scalars[index]
            index += 1
            switch c {
            case ".": return .set(.any)
            case "(":
                if peek() == "?" {
                    guard index + 1 < scalars.count, scalars[index + 1] == ":" else {
                        throw SyntaxError(message: "only (?:...) groups are supported in room patterns")
                    }
                    index += 2
                }
                let inner = try parseAlternation()
                guard peek() == ")" else { throw SyntaxError(message: "missing ) in room pattern") }
                index += 1
                return inner
            case "[": return .set(try parseClass())
            case "\\": return .set(try parseEscape(inClass: false))
            case "*", "+", "?", "{":
                throw SyntaxError(message: "nothing to repeat before \"\(c)\" in room pattern")
            case ")":
                throw SyntaxError(message: "unbalanced ) in room pattern")
            default:
                return .set(ScalarSet(ranges: [c.value...c.value]))
            }
        }

        mutating func parseEscape(inClass: Bool) throws(SyntaxError) -> ScalarSet {
            guard let c = peek() else { throw SyntaxError(message: "trailing \\ in room pattern") }
            index += 1
            switch c {
            case "d": return ScalarSet(ranges: [48...57])
            case "w": return ScalarSet(ranges: [48...57, 65...90, 95...95, 97...122])
            case "s": return ScalarSet(ranges: [9...13, 32...32])
            case "D": return ScalarSet(ranges: [48...57], negated: true)
            case "W": return ScalarSet(ranges: [48...57, 65...90, 95...95, 97...122], negated: true)
            case "S": return ScalarSet(ranges: [9...13, 32...32], negated: true)
            case "n": return ScalarSet(ranges: [10...10])
            case "t": return ScalarSet(ranges: [9...9])
            default:
                if c.properties.isAlphabetic || c.properties.numericType != nil {
                    throw SyntaxError(message: "unsupported escape \\\(c) in room pattern")
                }
                return ScalarSet(ranges: [c.value...c.value])
            }
        }

        mutating func parseClass() throws(SyntaxError) -> ScalarSet {
            var set = ScalarSet(ranges: [])
            if peek() == "^" { set.negated = true; index += 1 }
            var first = true
            while let c = peek(), c != "]" || first {
                first = false
                index += 1
                var low: UInt32
                if c == "\\" {
                    let escaped = try parseEscape(inClass: true)
                    if escaped.negated || escaped.ranges.count != 1 || escaped.ranges[0].count != 1 {
                        guard !escaped.negated else { throw SyntaxError(message: "negated escapes are not supported inside [...]") }
                        set.ranges += escaped.ranges
                        continue
                    }
                    low = escaped.ranges[0].lowerBound
                } else {
                    low = c.value
                }
                if peek() == "-", index + 1 < scalars.count, scalars[index + 1] != "]" {
                    index += 1
                    var highScalar = scalars[index]
                    index += 1
                    if highScalar == "\\" {
                        let escaped = try parseEscape(inClass: true)
                        guard escaped.ranges.count == 1, escaped.ranges[0].count == 1, !escaped.negated else {
                            throw SyntaxError(message: "bad range in [...] in room pattern")
                        }
                        highScalar = Unicode.Scalar(escaped.ranges[0].lowerBound)!
                    }
                    guard highScalar.value >= low else { throw SyntaxError(message: "bad range in [...] in room pattern") }
                    set.ranges.append(low...highScalar.value)
                } else {
                    set.ranges.append(low...low)
                }
            }
            guard peek() == "]" else { throw SyntaxError(message: "missing ] in room pattern") }
            index += 1
            return set
        }
    }

    struct Compiler {
        var program: [Instruction] = []
        private var steps = 0

        mutating func append(_ instruction: Instruction) throws(SyntaxError) {
            guard program.count < RoomPattern.maxInstructions else {
                throw SyntaxError(message: "room pattern too complex")
            }
            program.append(instruction)
        }

        mutating func emit(_ node: Node) throws(SyntaxError) {
            steps += 1
            guard steps <= RoomPattern.maxCompileSteps else {
                throw SyntaxError(message: "room pattern too complex (its repeats expand to more than \(RoomPattern.maxCompileSteps) parts)")
            }
            switch node {
            case .empty:
                break
            case .set(let set):
                try append(.consume(set))
            case .sequence(let items):
                for item in items { try emit(item) }
            case .alternation(let branches):
                // split L1, next; L1: branch; jump end; next: split ...
                var jumps: [Int] = []
                for (i, branch) in branches.enumerated() {
                    if i < branches.count - 1 {
                        let split = program.count
                        try append(.split(split + 1, -1))
                        try emit(branch)
                        jumps.append(program.count)
                        try append(.jump(-1))
                        program[split] = .split(split + 1, program.count)
                    } else {
                        try emit(branch)
                    }
                }
                for jump in jumps { program[jump] = .jump(program.count) }
            case .repeated(let inner, let min, let max):
                for _ in 0..<min { try emit(inner) }
                if let max {
                    // Up to (max - min) optional copies.
                    var splits: [Int] = []
                    for _ in 0..<(max - min) {
                        splits.append(program.count)
                        try append(.split(program.count + 1, -1))
                        try emit(inner)
                    }
                    for split in splits { program[split] = .split(split + 1, program.count) }
                } else {
                    // L: split body, end; body; jump L
                    let loop = program.count
                    try append(.split(loop + 1, -1))
                    try emit(inner)
                    try append(.jump(loop))
                    program[loop] = .split(loop + 1, program.count)
                }
            }
        }
    }
}
