import Foundation
import ParleyBench
import ParleyLog
import ParleyServer
import Synchronization

let usage = """
usage: parley <command> [options]

commands:
  serve     run the chat server (parley serve --help for its options)
  backup    copy a data directory while the server runs (parley backup --help)
  token     mint a development token (parley token --help)
  vapid-keys  make a VAPID key pair for Web Push (parley vapid-keys --help)
  chat      terminal chat client (parley chat --help for its options)
  bench     load generators: parley bench fanout|idle|publish-durable|upload (parley bench --help)
  version   show the version, git commit and C library versions (also --version)
  help      show this help
"""

func fail(_ message: String, code: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(code)
}

/// Writes straight to fd 1, so the line is out even when stdout is a pipe.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "help" : arguments.removeFirst()

switch command {
case "serve":
    let environment = ProcessInfo.processInfo.environment
    let configuration: ServerConfiguration
    do {
        guard let parsed = try ServerConfiguration.parse(arguments: arguments, environment: environment) else {
            say(ServerConfiguration.usage)
            exit(0)
        }
        configuration = parsed
    } catch {
        fail("parley serve: \(error.description)")
    }
    // One logger for the whole server, made here and passed down; lines go to stderr from a
    // thread of their own.
    let output = StandardErrorOutput()
    let destination = LogDestination(handler: StreamLogHandler(format: configuration.logFormat, output: output),
                                     level: configuration.logLevel)
    let logger = Logger(label: "parley", destination: destination)
    let server: ParleyServer
    do {
        server = try ParleyServer(configuration: configuration, logger: logger)
    } catch let error as StartupError {
        // Something in the configuration cannot be used (TLS files, the data directory): 2,
        // like any other configuration error.
        output.flush(timeoutMillis: 1000)
        fail("parley serve: \(error)", code: 2)
    } catch {
        output.flush(timeoutMillis: 1000)
        fail("parley serve: \(error)", code: 1)
    }
    let reloadArguments = arguments
    server.runUntilSignalled(ready: {
        for line in server.listeningLines { say(line) }
    }, reload: {
        // SIGHUP: the config file, the environment and the flags again, as at start.
        try ServerConfiguration.parse(arguments: reloadArguments, environment: ProcessInfo.processInfo.environment) ?? configuration
    })
    output.flush(timeoutMillis: 2000)
    say("parley stopped")
    exit(0)
case "backup":
    if arguments.contains("--help") || arguments.contains("-h") { say(DataBackup.usage); exit(0) }
    var data = ProcessInfo.processInfo.environment["PARLEY_DATA"].flatMap { $0.isEmpty ? nil : $0 } ?? "./parley-data"
    var destination: String?
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        let (flag, inline) = argument.contains("=")
            ? (String(argument.prefix { $0 != "=" }), String(argument.drop { $0 != "=" }.dropFirst()))
            : (argument, nil as String?)
        guard flag == "--data" || flag == "--to" else { fail("parley backup: unknown option \(argument)\n\n\(DataBackup.usage)") }
        let value: String
        if let inline {
            value = inline
        } else {
            index += 1
            guard index < arguments.count else { fail("parley backup: \(flag) needs a directory") }
            value = arguments[index]
        }
        guard !value.isEmpty else { fail("parley backup: \(flag) needs a directory") }
        if flag == "--data" { data = value } else { destination = value }
        index += 1
    }
    guard let destination else { fail("parley backup: --to NEWDIR is required\n\n\(DataBackup.usage)") }
    do {
        let summary = try DataBackup.run(dataDirectory: data, to: destination)
        say("backup of \(data) written to \(destination): \(summary)")
    } catch {
        fail("parley backup: \(error.message)", code: 1)
    }
case "token":
    if arguments.contains("--help") { say(TokenCommand.usage); exit(0) }
    do { say(try TokenCommand.run(arguments: arguments)) } catch { fail("parley token: \(error.description)") }
case "vapid-keys":
    if arguments.contains("--help") { say(VapidKeysCommand.usage); exit(0) }
    do { say(try VapidKeysCommand.run()) } catch { fail("parley vapid-keys: \(error.description)") }
case "chat":
    ChatCommand.run(arguments)
case "bench":
    // Each bench is its own subcommand: ParleyBench runs fanout and idle; publish-durable
    // measures acknowledged durable publishes.
    let bench = arguments.first ?? "--help"
    if bench == "publish-durable" {
        do {
            let options = try DurablePublishBench.parse(Array(arguments.dropFirst()))
            let (report, ok) = DurablePublishBench.run(options)
            say(report)
            exit(ok ? 0 : 1)
        } catch {
            fail("parley bench: \(error)")
        }
    }
    if bench == "upload" {
        let options: UploadBench.Options
        do {
            guard let parsed = try UploadBench.parse(Array(arguments.dropFirst())) else {
                say(UploadBench.usage)
                exit(0)
            }
            options = parsed
        } catch {
            fail("parley bench upload: \(error.message)\n\n\(UploadBench.usage)")
        }
        let finished = DispatchSemaphore(value: 0)
        let outcome = Mutex<(String, Bool)>(("", false))
        // Detached: top-level code is on the main actor, whose thread waits below.
        Task.detached {
            let result = await UploadBench.run(options)
            outcome.withLock { $0 = result }
            finished.signal()
        }
        finished.wait()
        let (report, ok) = outcome.withLock { $0 }
        say(report)
        exit(ok ? 0 : 1)
    }
    if BenchCommand.subcommands.contains(bench) {
        exit(BenchCommand.run(bench, arguments: Array(arguments.dropFirst())))
    }
    if bench == "--help" || bench == "-h" || bench == "help" {
        say(BenchCommand.usage + "\n\n" + DurablePublishBench.usage + "\n\n" + UploadBench.usage)
        exit(0)
    }
    fail("parley bench: unknown bench \"\(bench)\"\n\n\(BenchCommand.usage)")
case "version", "--version", "-V":
    say(BuildInfo.versionText)
case "help", "--help", "-h":
    say(usage)
default:
    fail("parley: unknown command \"\(command)\"\n\n\(usage)")
}
