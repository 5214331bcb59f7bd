import Foundation
import ParleyBench
import ParleyServer
import Synchronization

let usage = """
usage: parley <command> [options]

commands:
  serve     run the chat server (parley serve --help for its options)
  token     mint a development token (parley token --help)
  chat      terminal chat client (parley chat --help for its options)
  bench     load generators: parley bench fanout|idle|publish-durable|upload (parley bench --help)
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
    let configuration: ServerConfiguration
    do {
        guard let parsed = try ServerConfiguration.parse(arguments: arguments, environment: ProcessInfo.processInfo.environment) else {
            say(ServerConfiguration.usage)
            exit(0)
        }
        configuration = parsed
    } catch {
        fail("parley serve: \(error.description)")
    }
    let server: ParleyServer
    do {
        server = try ParleyServer(configuration: configuration)
    } catch let error as StartupError {
        // Something in the configuration cannot be used (TLS files, the data directory): 2,
        // like any other configuration error.
        fail("parley serve: \(error)", code: 2)
    } catch {
        fail("parley serve: \(error)", code: 1)
    }
    server.runUntilSignalled {
        for line in server.listeningLines { say(line) }
    }
    say("parley stopped")
    exit(0)
case "token":
    if arguments.contains("--help") { say(TokenCommand.usage); exit(0) }
    do { say(try TokenCommand.run(arguments: arguments)) } catch { fail("parley token: \(error.description)") }
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
case "help", "--help", "-h":
    say(usage)
default:
    fail("parley: unknown command \"\(command)\"\n\n\(usage)")
}
