import Foundation
import Synchronization
import Testing
import ParleyCore
import ParleyTestSupport

/// Records what a broker delivers to a node, per room, in order.
final class DeliveryRecorder: BrokerDelivery {
    private let log = Mutex<[(RoomKey, RoomEvent)]>([])
    private let resynchronized = Mutex<[RoomKey]>([])

    func broker(deliver event: RoomEvent, in room: RoomKey) { log.withLock { $0.append((room, event)) } }
    func broker(resynchronize room: RoomKey) { resynchronized.withLock { $0.append(room) } }

    func events(in room: RoomKey) -> [RoomEvent] { log.withLock { $0.filter { $0.0 == room }.map(\.1) } }

    /// Rooms the broker asked to rebuild, in order.
    var resynchronizedRooms: [RoomKey] { resynchronized.withLock { $0 } }

    /// Offsets of the stored messages delivered for `room`, in order.
    func offsets(in room: RoomKey) -> [Int64] {
        events(in: room).compactMap { if case .message(let m) = $0, m.offset > 0 { m.offset } else { nil } }
    }

    /// Waits until `condition` holds for the room's events (at most `timeout` seconds).
    func wait(in room: RoomKey, timeout: Double = 10, until condition: ([RoomEvent]) -> Bool) async -> Bool {
        do {
            try await eventually("the room's events", timeout: timeout) { condition(events(in: room)) }
            return true
        } catch {
            return condition(events(in: room))
        }
    }
}

extension Broker {
    func publish(_ message: Message, clientMessageID: String? = nil) async throws(ParleyError) -> Message {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Message, ParleyError>, Never>) in
            do throws(ParleyError) {
                try publish(message, clientMessageID: clientMessageID) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    func subscribe(_ room: RoomKey) async throws(ParleyError) -> RoomPosition {
        let result = await withCheckedContinuation { continuation in subscribe(room) { continuation.resume(returning: $0) } }
        return try result.get()
    }
}

extension PresenceStore {
    func add(_ member: Member, to room: RoomKey) async throws(ParleyError) -> Bool {
        let result = await withCheckedContinuation { continuation in add(member, to: room) { continuation.resume(returning: $0) } }
        return try result.get()
    }
    func remove(_ member: Member, from room: RoomKey) async throws(ParleyError) -> Bool {
        let result = await withCheckedContinuation { continuation in remove(member, from: room) { continuation.resume(returning: $0) } }
        return try result.get()
    }
    func members(of room: RoomKey, limit: Int = 1_000) async throws(ParleyError) -> (members: [Member], total: Int) {
        let result = await withCheckedContinuation { continuation in members(of: room, limit: limit) { continuation.resume(returning: $0) } }
        return try result.get()
    }
    func rooms(in channel: String, after cursor: String? = nil, limit: Int = 1_000) async throws(ParleyError) -> [String] {
        let result = await withCheckedContinuation { continuation in
            rooms(in: channel, after: cursor, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }
}

/// A draft message for a broker (the broker assigns the offset).
func draft(_ text: String, in room: RoomKey, id: String = UUID().uuidString, sender: Member? = nil) -> Message {
    Message(id: id, offset: 0, timestampMillis: SystemWallClock().nowMillis(), room: room, sender: sender, body: .string(text))
}
