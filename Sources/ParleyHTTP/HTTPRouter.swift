/// The outcome of looking up a request in an `HTTPRouter`.
public enum HTTPRouteMatch<Handler: Sendable>: Sendable {
    /// A route matched; `params` holds the `:name` segments and, for a wildcard route,
    /// the rest of the path under `"*"` (without a leading slash).
    case found(Handler, params: [String: String])
    /// Some route matches the path, but not for this method; answer 405 with an `Allow`
    /// header listing `allowed` (sorted).
    case methodNotAllowed(allowed: [String])
    /// No route matches the path.
    case notFound
}

/// Maps a method and a decoded path to a handler.
///
/// Patterns are `/`-separated segments: a literal (`rooms`), a parameter (`:room`, matching
/// one non-empty segment) or, as the last segment only, `*` (matching the rest of the path,
/// possibly empty). When several routes match, the most specific wins, comparing segment by
/// segment (literal before parameter before wildcard), then the one added first. A HEAD
/// request falls back to the GET route of the same path.
///
/// Matching runs on the decoded path, so `%2F` inside a segment splits it like `/` would.
public struct HTTPRouter<Handler: Sendable>: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case wildcard

        var rank: Int {
            switch self {
            case .literal: 0
            case .parameter: 1
            case .wildcard: 2
            }
        }
    }

    private struct Route: Sendable {
        var method: String
        var segments: [Segment]
        var handler: Handler
    }

    private var routes: [Route] = []

    /// An empty router.
    public init() {}

    /// Adds a route for `method` (e.g. `"GET"`) and `pattern` (e.g. `"/rooms/:room/messages"`).
    public mutating func add(_ method: String, _ pattern: String, _ handler: Handler) {
        let parts = Self.split(pattern)
        var segments: [Segment] = []
        for (index, part) in parts.enumerated() {
            if part == "*" {
                precondition(index == parts.count - 1, "'*' must be the last segment of \(pattern)")
                segments.append(.wildcard)
            } else if part.hasPrefix(":") && part.count > 1 {
                segments.append(.parameter(String(part.dropFirst())))
            } else {
                segments.append(.literal(String(part)))
            }
        }
        routes.append(Route(method: method, segments: segments, handler: handler))
    }

    /// Finds the route for `method` and the decoded `path`.
    public func match(method: String, path: String) -> HTTPRouteMatch<Handler> {
        let parts = Self.split(path)
        var best: (route: Route, params: [String: String])?
        var bestGetForHead: (route: Route, params: [String: String])?
        var allowed = Set<String>()
        for route in routes {
            guard let params = Self.params(route.segments, parts) else { continue }
            allowed.insert(route.method)
            if route.method == method {
                if best == nil || Self.moreSpecific(route.segments, than: best!.route.segments) {
                    best = (route, params)
                }
            } else if method == "HEAD" && route.method == "GET" {
                if bestGetForHead == nil || Self.moreSpecific(route.segments, than: bestGetForHead!.route.segments) {
                    bestGetForHead = (route, params)
                }
            }
        }
        if let found = best ?? bestGetForHead { return .found(found.route.handler, params: found.params) }
        if allowed.isEmpty { return .notFound }
        if allowed.contains("GET") { allowed.insert("HEAD") }
        return .methodNotAllowed(allowed: allowed.sorted())
    }

    private static func split(_ path: String) -> [Substring] {
        var path = Substring(path)
        if path.first == "/" { path = path.dropFirst() }
        return path.split(separator: "/", omittingEmptySubsequences: false)
    }

    private static func params(_ segments: [Segment], _ parts: [Substring]) -> [String: String]? {
        var params: [String: String] = [:]
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .wildcard:
                params["*"] = parts[min(index, parts.count)...].joined(separator: "/")
                return params
            case .literal(let literal):
                guard index < parts.count, parts[index] == literal else { return nil }
            case .parameter(let name):
                guard index < parts.count, !parts[index].isEmpty else { return nil }
                params[name] = String(parts[index])
            }
        }
        return segments.count == parts.count ? params : nil
    }

    private static func moreSpecific(_ a: [Segment], than b: [Segment]) -> Bool {
        for (x, y) in zip(a, b) where x.rank != y.rank { return x.rank < y.rank }
        return a.count > b.count
    }
}
