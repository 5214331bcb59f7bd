extension Hub {
    /// Tells `key`'s subscribers (on every node) that a user read it up to an offset: the
    /// mark itself is already in the ``ReadStateStore``. Best effort, like typing.
    public func announce(_ receipt: ReadReceipt, in key: RoomKey) {
        broker.broadcast(.read(receipt), in: key)
    }

    /// Records `mark` in `reads` for every door: capped at the room's newest offset (a mark
    /// never runs ahead of the room, and never moves back: the store keeps the greater), then
    /// told: a conversation new to the user to their live inboxes, a mark that moved to the
    /// room (``announce(_:in:)``). `completion` gets the mark as stored, on a store thread.
    public func markRead(_ mark: ReadMark, in reads: any ReadStateStore,
                         completion: @escaping @Sendable (Result<ReadMark, ParleyError>) -> Void) {
        let key = mark.room
        lastOffset(of: key) { [self] result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let last):
                var capped = mark
                capped.offset = min(max(0, mark.offset), last)
                reads.record(capped) { [self] result in
                    completion(result.map { update in
                        if update.added { announceConversation(key.room, to: update.mark.user, in: key.channel) }
                        if update.moved { announce(ReadReceipt(update.mark), in: key) }
                        return update.mark
                    })
                }
            }
        }
    }

    /// Tells `user`'s live inboxes (on every node) that `room` joined their conversations.
    public func announceConversation(_ room: String, to user: String, in channel: String) {
        broker.broadcast(.conversationAdded(room: room), in: RoomKey(channel: channel, room: ReservedRoom.noticeRoom(of: user)))
    }
}
