import Foundation
import ParleyClient
import ParleyCore

/// `parley chat` flags.
struct ChatOptions {
    var url = "ws://127.0.0.1:8080/v3/websocket"
    var channel = "demo"
    var room = "observable-room"
    var name: String?
    var color: String?
    var token: String?
    /// The user id (open channels: proves nothing; a token's `user` claim decides otherwise).
    var user: String?
    var history = 20
    var plain = false
    /// PEM certificates to trust for wss:// (a self-signed server), instead of the system's.
    var caFile: String?

    static let usage = """
    usage: parley chat [options]

    A terminal chat client. Full-screen when stdin and stdout are a terminal; otherwise a plain
    line mode for scripts: each input line is sent as a message, and messages from others are
    printed as "NAME: TEXT" (notices go to stderr).

    options:
      --url URL        the server's native door (default ws://127.0.0.1:8080/v3/websocket)
      --channel ID     channel (default demo)
      --room NAME      room (default observable-room)
      --name NAME      your name (default: a random one such as "hiddensun")
      --color #RRGGBB  your color (default: random)
      --token JWT      token for channels with authentication
      --user ID        your user id, so your read marks, unread counts and direct messages
                       follow you (open channels take it as given: it proves nothing)
      --history N      recent messages shown on join (default 20)
      --plain          line mode even on a terminal
      --ca FILE        trust this PEM certificate for wss:// (self-signed servers)

    commands (full-screen): /members, /room NAME, /name NAME, /upload PATH [caption],
    /inbox, /dm USER, /seen, /quit (or Ctrl-C)
    line mode: a line "/upload PATH [caption]" sends a file (progress on stderr); files others
    send are printed as "NAME: [image cat.jpg 1.2 MB] URL"
    """

    /// Parses the arguments; nil for --help.
    static func parse(_ arguments: [String]) throws(ChatOptionError) -> ChatOptions? {
        var options = ChatOptions()
        var rest = arguments[...]
        func value(_ flag: String) throws(ChatOptionError) -> String {
            guard let next = rest.popFirst() else { throw ChatOptionError(message: "\(flag) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            var flag = argument
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                rest.insert(String(argument[argument.index(after: equals)...]), at: rest.startIndex)
            }
            switch flag {
            case "--url": options.url = try value(flag)
            case "--channel": options.channel = try value(flag)
            case "--room": options.room = try value(flag)
            case "--name": options.name = try value(flag)
            case "--color":
                let color = try value(flag)
                guard RandomIdentity.isHexColor(color) else { throw ChatOptionError(message: "--color must be #RRGGBB") }
                options.color = color
            case "--token": options.token = try value(flag)
            case "--user":
                let user = try value(flag)
                if let problem = UserID.problem(with: user) { throw ChatOptionError(message: "--user: \(problem)") }
                options.user = user
            case "--history":
                guard let n = Int(try value(flag)), n >= 0 else { throw ChatOptionError(message: "--history must be a number ≥ 0") }
                options.history = n
            case "--plain": options.plain = true
            case "--ca": options.caFile = try value(flag)
            case "--help", "-h": return nil
            default: throw ChatOptionError(message: "unknown option \(argument)")
            }
        }
        guard URL(string: options.url) != nil else { throw ChatOptionError(message: "bad --url \(options.url)") }
        return options
    }
}

struct ChatOptionError: Error {
    let message: String
}
