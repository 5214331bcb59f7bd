/// The wire names of the native protocol (Scaledrone API v3 and Parley's extensions,
/// docs/protocols.md "Native"), written once for the three programs that speak it: the
/// server's native door, the Swift SDK and the bench. A name here is a promise to every
/// Scaledrone SDK in the field: change none of them.
public enum NativeProtocol {
    /// Field names of the JSON objects both ways.
    public enum Field {
        public static let type = "type"
        public static let callback = "callback"
        public static let error = "error"
        public static let room = "room"
        // handshake → and its reply ←
        public static let channel = "channel"
        /// The handshake's member data (snake case); a member object spells it ``memberClientData``.
        public static let clientData = "client_data"
        public static let clientID = "client_id"
        public static let requireAuth = "require_auth"
        // authenticate →
        public static let token = "token"
        // subscribe →
        public static let historyCount = "history_count"
        /// The older spelling of ``historyCount``, still accepted.
        public static let history = "history"
        public static let since = "since"
        // publish →
        public static let message = "message"
        public static let messageID = "message_id"
        // history →
        public static let before = "before"
        public static let limit = "limit"
        // publish, history_message ← and the publish reply
        public static let id = "id"
        public static let timestamp = "timestamp"
        public static let offset = "offset"
        public static let index = "index"
        public static let deleted = "deleted"
        // a history page ←
        public static let messages = "messages"
        public static let hasMore = "has_more"
        // message actions, both ways (docs/protocols.md, "Message actions")
        /// A reply's target id (`reply` →, and a replied message ←).
        public static let replyTo = "reply_to"
        /// The id of the message an action acts on.
        public static let target = "target"
        public static let emoji = "emoji"
        /// A message's latest edit (Unix seconds), in history.
        public static let edited = "edited"
        /// A message's reactions, in history: `[{emoji, count, names}]`.
        public static let reactions = "reactions"
        /// The first reactors' names of one reaction.
        public static let names = "names"
        /// The stable code of a refused action.
        public static let code = "code"
        // observable_* and room_closed ←
        public static let data = "data"
        public static let truncated = "truncated"
        public static let count = "count"
        public static let reason = "reason"
        // a member object (in `data`)
        public static let memberClientData = "clientData"
        public static let memberAuthData = "authData"
        // users, read state, direct rooms and the inbox (docs/protocols.md, "Users")
        /// The handshake's user id (open channels); a member's, receipt's or message's user.
        public static let userID = "user_id"
        public static let user = "user"
        public static let users = "users"
        public static let name = "name"
        /// Handshake: false keeps this user's read receipts private.
        public static let shareReceipts = "share_receipts"
        /// Subscribe: send this room's `read` events and its `receipts` list.
        public static let receipts = "receipts"
        /// Subscribe: send `unread` counts for this room.
        public static let unread = "unread"
        public static let mentions = "mentions"
        public static let unreadCapped = "unread_capped"
        public static let readOffset = "read_offset"
        public static let readers = "readers"
        public static let conversations = "conversations"
        public static let conversation = "conversation"
        public static let last = "last"
        public static let activity = "activity"
        /// Inbox: keep sending `conversation` updates.
        public static let watch = "watch"
        public static let devices = "devices"
        // push (docs/push.md)
        public static let platform = "platform"
        public static let subscription = "subscription"
        public static let endpoint = "endpoint"
        public static let keys = "keys"
        public static let p256dh = "p256dh"
        public static let auth = "auth"
        public static let topic = "topic"
        public static let environment = "environment"
        public static let until = "until"
        public static let vapidPublicKey = "vapid_public_key"
    }

    /// Values of the `type` field.
    public enum MessageType {
        // client → server
        public static let handshake = "handshake"
        public static let authenticate = "authenticate"
        public static let subscribe = "subscribe"
        public static let unsubscribe = "unsubscribe"
        /// Also server → client: a room message, live or replayed.
        public static let publish = "publish"
        public static let history = "history"
        // message actions: commands, and (but `reply`, pushed as a `publish`) their events
        public static let reply = "reply"
        public static let edit = "edit"
        public static let delete = "delete"
        public static let react = "react"
        public static let unreact = "unreact"
        // users: commands (`read` is also the receipt event), then events
        public static let read = "read"
        public static let dm = "dm"
        public static let inbox = "inbox"
        /// A room's members folded into their users (the user presence view).
        public static let roomUsers = "room_users"
        // push
        public static let registerDevice = "register_device"
        public static let unregisterDevice = "unregister_device"
        public static let mute = "mute"
        public static let receipts = "receipts"
        public static let unread = "unread"
        public static let conversation = "conversation"
        // server → client
        public static let historyMessage = "history_message"
        public static let messageDeleted = "message_deleted"
        public static let roomClosed = "room_closed"
        public static let observableMembers = "observable_members"
        public static let observableMemberJoin = "observable_member_join"
        public static let observableMemberLeave = "observable_member_leave"
    }
}
