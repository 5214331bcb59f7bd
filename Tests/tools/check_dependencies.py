#!/usr/bin/env python3
"""Keeps Package.swift honest about which module uses which.

1. Each target's declared dependencies in Package.swift are exactly the project modules its
   sources import (a dependency nobody imports, or an import nobody declared, is an error).
2. Each module imports only what the layering allows (the table below, from the
   architecture: ParleyCore knows no sockets and no C, a door's module sits on ParleyIO...).

Toolchain modules (Foundation, Dispatch, Testing, ...) are always allowed and never declared.
Run by `make test`; `--self-test` checks the checker on made-up packages. Exit status 1 with
one line per problem, naming the target, the module and the file.
"""
import os
import re
import sys
import tempfile

# Modules of the toolchain and the platform: always fine, never declared as dependencies.
TOOLCHAIN = {
    "Foundation", "FoundationEssentials", "Synchronization", "Dispatch", "Glibc", "Darwin",
    "Musl", "Testing", "XCTest", "Observation", "Swift", "_Concurrency", "PackagePlugin",
    # Apple-only, behind `#if canImport(...)` (the SDK's notification permission glue).
    "UserNotifications",
}

# Which project modules a module may import (the module table of the architecture). A module
# missing here (executables, test targets, the bench) has no layering rule of its own.
C_MODULES = {"CLibUV", "COpenSSL", "CZlib", "CSQLite", "CVips", "CCurl"}
MAY_IMPORT = {
    # The domain: no I/O, no C, nothing of the project below or beside it.
    "ParleyCore": set(),
    "ParleyIO": {"CLibUV", "COpenSSL"},
    "ParleyHTTP": {"ParleyIO"},
    "ParleyWebSocket": {"ParleyIO", "ParleyHTTP", "CZlib", "COpenSSL"},
    "ParleySQLite": {"ParleyCore", "CSQLite"},
    # Logging: nothing of the project (every layer may be handed a logger).
    "ParleyLog": set(),
    # Cluster mode: Parley's own RESP client on ParleyIO (no C module).
    "ParleyRedis": {"ParleyCore", "ParleyIO"},
    # Attachments: the file store and the image pipeline (libvips), no event loop.
    "ParleyFiles": {"ParleyCore", "CVips", "COpenSSL"},
    # The doors: everything above.
    "ParleyServer": C_MODULES | {"ParleyIO", "ParleyHTTP", "ParleyWebSocket", "ParleyCore",
                                 "ParleySQLite", "ParleyRedis", "ParleyFiles", "ParleyLog"},
    "ParleyClient": {"ParleyIO", "ParleyHTTP", "ParleyWebSocket", "ParleyCore"},
}
for module in C_MODULES:
    MAY_IMPORT[module] = set()

IMPORT = re.compile(
    r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*import\s+"
    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE)
TARGET_CALL = re.compile(r"\.(target|testTarget|executableTarget|systemLibrary|plugin|macro)\s*\(")


def strip_comments(text):
    """Swift source without // and /* */ comments, strings kept (they hold names)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def call_arguments(text, start):
    """The text between the parenthesis at `start` and its match."""
    depth, i = 0, start
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        elif text[i] == '"':
            i = text.index('"', i + 1)
        i += 1
    raise ValueError("unbalanced parentheses in Package.swift")


def list_argument(arguments, label):
    """The elements of `label: [ ... ]` as written (None when the label is absent)."""
    match = re.search(label + r"\s*:\s*\[", arguments)
    if not match:
        return None
    depth, i = 1, match.end()
    while depth:
        depth += {"[": 1, "]": -1}.get(arguments[i], 0)
        i += 1
    return arguments[match.end():i - 1]


def parse_package(text):
    """[(kind, name, declared dependency names, sources directory)] of Package.swift."""
    text = strip_comments(text)
    targets, consumed = [], 0
    for match in TARGET_CALL.finditer(text):
        if match.start() < consumed:
            continue  # `.target(name:)` inside another target's dependencies
        kind = match.group(1)
        arguments = call_arguments(text, match.end() - 1)
        consumed = match.end() + len(arguments)
        name = re.search(r'name\s*:\s*"([^"]+)"', arguments)
        if not name:
            continue
        name = name.group(1)
        dependencies = set()
        listed = list_argument(arguments, "dependencies") or ""
        # "X", .target(name: "X"), .product(name: "X", package: "P"), .byName(name: "X")
        for element in re.finditer(r'(?:\.(?:target|product|byName)\s*\(\s*name\s*:\s*)?"([^"]+)"(?:\s*,\s*package\s*:\s*"[^"]+")?\s*\)?', listed):
            dependencies.add(element.group(1))
        path = re.search(r'path\s*:\s*"([^"]+)"', arguments)
        default = ("Tests/" if kind == "testTarget" else "Plugins/" if kind == "plugin" else "Sources/") + name
        targets.append((kind, name, dependencies, path.group(1) if path else default))
    return targets


def imports_of(directory, root):
    """{module: first "file:line" importing it} for the Swift files under `directory`."""
    found = {}
    for folder, _, files in sorted(os.walk(directory)):
        for file in sorted(files):
            if not file.endswith(".swift"):
                continue
            path = os.path.join(folder, file)
            with open(path, encoding="utf-8") as handle:
                text = strip_comments(handle.read())
            for match in IMPORT.finditer(text):
                line = text.count("\n", 0, match.start(1)) + 1
                found.setdefault(match.group(1), f"{os.path.relpath(path, root)}:{line}")
    return found


def check(root):
    """The problems of the package at `root`, one sentence each."""
    with open(os.path.join(root, "Package.swift"), encoding="utf-8") as handle:
        targets = parse_package(handle.read())
    project = {name for _, name, _, _ in targets}
    problems = []
    for kind, name, declared, path in targets:
        if kind == "systemLibrary":
            continue  # a module map and a shim: nothing imported, nothing declared
        directory = os.path.join(root, path)
        if not os.path.isdir(directory):
            problems.append(f"{name}: its sources directory {path} does not exist")
            continue
        imported = {module: where for module, where in imports_of(directory, root).items()
                    if module not in TOOLCHAIN and module != name}
        for module, where in sorted(imported.items()):
            if module not in project:
                problems.append(f"{name} imports {module} ({where}), which is neither a target of "
                                "Package.swift nor a toolchain module")
            elif module not in declared:
                problems.append(f"{name} imports {module} ({where}) but does not declare it: add "
                                f"\"{module}\" to {name}'s dependencies in Package.swift")
        # A plugin depends on the tools it runs, not on modules it imports.
        for module in sorted(declared - set(imported) if kind != "plugin" else set()):
            problems.append(f"{name} declares a dependency on {module} but no file under {path} "
                            f"imports it: remove it from {name}'s dependencies in Package.swift")
        if name in MAY_IMPORT:
            allowed = MAY_IMPORT[name]
            rule = (f"may import only {', '.join(sorted(allowed))}" if allowed
                    else "may import no module of the project, toolchain modules only")
            for module in sorted((set(imported) | declared) & project):
                if module not in allowed:
                    where = imported.get(module, "Package.swift")
                    problems.append(f"{name} must not use {module} ({where}): {name} {rule}")
    return problems


def self_test():
    """The checker finds what it must find, on small made-up packages."""
    def package(targets, files):
        with tempfile.TemporaryDirectory(prefix="check-dependencies-") as root:
            with open(os.path.join(root, "Package.swift"), "w") as handle:
                handle.write("// swift-tools-version:6.0\nlet package = Package(name: \"P\", targets: [\n"
                             + ",\n".join(targets) + "\n])\n")
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as handle:
                    handle.write(text)
            return check(root)

    clean = package(['.target(name: "ParleyIO", dependencies: ["CLibUV"])',
                     '.systemLibrary(name: "CLibUV", pkgConfig: "libuv")',
                     '.target(name: "ParleyHTTP", dependencies: [.target(name: "ParleyIO")]) // "ParleyCore"',
                     '.testTarget(name: "ParleyHTTPTests", dependencies: ["ParleyHTTP"])'],
                    {"Sources/ParleyIO/A.swift": "import Foundation\n@preconcurrency import CLibUV\n",
                     "Sources/ParleyHTTP/B.swift": "// import ParleyCore\n@testable import ParleyIO\nimport struct Foundation.Date\n",
                     "Tests/ParleyHTTPTests/C.swift": "import Testing\n@testable import ParleyHTTP\n"})
    assert clean == [], clean
    unused = package(['.target(name: "ParleyIO")', '.target(name: "ParleyHTTP", dependencies: ["ParleyIO"])'],
                     {"Sources/ParleyIO/A.swift": "", "Sources/ParleyHTTP/B.swift": "import Foundation\n"})
    assert any("ParleyHTTP declares a dependency on ParleyIO" in p for p in unused), unused
    undeclared = package(['.target(name: "ParleyIO")', '.target(name: "ParleyHTTP")'],
                         {"Sources/ParleyIO/A.swift": "", "Sources/ParleyHTTP/B.swift": "import ParleyIO\n"})
    assert any("ParleyHTTP imports ParleyIO" in p and "does not declare" in p for p in undeclared), undeclared
    layering = package(['.target(name: "ParleyIO")', '.target(name: "ParleyCore", dependencies: ["ParleyIO"])'],
                       {"Sources/ParleyIO/A.swift": "", "Sources/ParleyCore/B.swift": "import ParleyIO\n"})
    assert any(p.startswith("ParleyCore must not use ParleyIO (Sources/ParleyCore/B.swift:1)")
               and "may import no module of the project" in p
               for p in layering), layering
    c_in_core = package(['.systemLibrary(name: "CSQLite")', '.target(name: "ParleyCore", dependencies: ["CSQLite"])'],
                        {"Sources/ParleyCore/B.swift": "import CSQLite\n"})
    assert any(p.startswith("ParleyCore must not use CSQLite") for p in c_in_core), c_in_core
    unknown = package(['.target(name: "ParleyHTTP")'], {"Sources/ParleyHTTP/B.swift": "import NIOCore\n"})
    assert any("ParleyHTTP imports NIOCore" in p for p in unknown), unknown
    print("check_dependencies self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    problems = check(root)
    for problem in problems:
        print(f"dependency check: {problem}", file=sys.stderr)
    if problems:
        print(f"dependency check: {len(problems)} problem(s) in {os.path.join(root, 'Package.swift')}", file=sys.stderr)
        return 1
    print("dependency check: every target declares exactly what it imports, and imports only what it may")
    return 0


if __name__ == "__main__":
    sys.exit(main())
