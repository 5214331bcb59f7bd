/// Which master serves each of the 16,384 slots, from `CLUSTER SLOTS`.
struct ClusterSlotMap: Sendable, Equatable {
    /// The masters, in the order `CLUSTER SLOTS` first named them.
    private(set) var nodes: [RedisEndpoint] = []
    /// Index into ``nodes`` per slot; `UInt16.max` when no node serves the slot.
    private var owners = [UInt16](repeating: .max, count: RedisKeySlot.count)

    init() {}

    /// Parses a `CLUSTER SLOTS` reply. Node entries are `[host, port, id, …]`; an empty host
    /// means "the node you asked" (`queried`). Credentials come from `template`.
    init(slotsReply reply: RedisValue, template: RedisEndpoint, queried: RedisEndpoint) throws(RedisError) {
        guard let ranges = reply.array else {
            throw RedisError(.unexpectedReply, "CLUSTER SLOTS: not an array: \(reply)")
        }
        for range in ranges {
            guard let entry = range.array, entry.count >= 3,
                  let start = entry[0].int, let end = entry[1].int,
                  start >= 0, end < Int64(RedisKeySlot.count), start <= end,
                  let master = entry[2].array, master.count >= 2,
                  let host = master[0].isNull ? "" : master[0].string, let port = master[1].int,
                  port > 0, port < 65536 else {
                throw RedisError(.unexpectedReply, "CLUSTER SLOTS: malformed range: \(range)")
            }
            let node = template.moved(to: host.isEmpty || host == "?" ? queried.host : host, port: Int(port))
            assign(Int(start)...Int(end), to: node)
        }
    }

    /// The master serving `slot`.
    func endpoint(forSlot slot: Int) -> RedisEndpoint? {
        let owner = owners[slot]
        return owner == .max ? nil : nodes[Int(owner)]
    }

    /// Number of slots without a master.
    var unservedSlotCount: Int { owners.reduce(0) { $0 + ($1 == .max ? 1 : 0) } }

    /// Records that `node` serves `slots` (after a `MOVED`, before the next full reload).
    mutating func assign(_ slots: ClosedRange<Int>, to node: RedisEndpoint) {
        let index: Int
        if let existing = nodes.firstIndex(where: { $0.address == node.address }) {
            index = existing
        } else {
            index = nodes.count
            nodes.append(node)
        }
        for slot in slots { owners[slot] = UInt16(index) }
    }
}

/// A cluster redirection in an error reply.
enum ClusterRedirection: Equatable {
    /// The slot lives on `node` now (`MOVED slot host:port`): update the map, retry there.
    case moved(slot: Int, node: RedisEndpoint)
    /// The slot is migrating and this key is on `node` (`ASK slot host:port`): retry there
    /// once, after `ASKING`.
    case ask(slot: Int, node: RedisEndpoint)
    /// A multi-key command during a migration (`TRYAGAIN`): retry shortly.
    case tryAgain

    /// Parses `MOVED 3999 127.0.0.1:6381` / `ASK …` / `TRYAGAIN …`; an empty host means the
    /// node that answered (`from`).
    init?(_ error: RedisError, from: RedisEndpoint) {
        guard let code = error.serverCode else { return nil }
        if code == "TRYAGAIN" {
            self = .tryAgain
            return
        }
        guard code == "MOVED" || code == "ASK" else { return nil }
        let parts = error.message.split(separator: " ")
        guard parts.count >= 3, let slot = Int(parts[1]), slot >= 0, slot < RedisKeySlot.count,
              let (host, port) = try? RedisEndpoint.hostAndPort(parts[2].hasPrefix(":") ? Substring(from.host) + parts[2] : parts[2], error.message),
              let port else { return nil }
        let node = from.moved(to: host, port: port)
        self = code == "MOVED" ? .moved(slot: slot, node: node) : .ask(slot: slot, node: node)
    }
}
