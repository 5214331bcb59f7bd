extension Hub {
    /// Tells `key`'s subscribers (on every node) that a user read it up to an offset: the
    /// mark itself is already in the ``ReadStateStore``. Best effort, like typing.
    public func announce(_ receipt: ReadReceipt, in key: RoomKey) {
        broker.broadcast(.read(receipt), in: key)
    }

    /// Tells `user`'s live inboxes (on every node) that `room` joined their conversations.
    public func announceConversation(_ room: String, to user: String, in channel: String) {
        broker.broadcast(.conversationAdded(room: room), in: RoomKey(channel: channel, room: ReservedRoom.noticeRoom(of: user)))
    }
}
