import Foundation
import PackagePlugin

/// Embeds every file under a target's `Web/` folder into the target as a generated Swift
/// source, so `parley` is one self-contained file: a copied binary serves its own web client
/// and never reads the build machine's source tree.
@main
struct EmbedWebAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let web = target.directoryURL.appending(path: "Web")
        var inputs: [URL] = []
        if let walker = FileManager.default.enumerator(at: web, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                inputs.append(url)
            }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedWebAssets.swift")
        return [.buildCommand(displayName: "Embedding \(inputs.count) web assets of \(target.name)",
                              executable: try context.tool(named: "embed-web-assets").url,
                              arguments: [web.path, output.path],
                              inputFiles: inputs, outputFiles: [output])]
    }
}
