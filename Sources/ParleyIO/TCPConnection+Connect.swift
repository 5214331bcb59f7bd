import CLibUV

extension EventLoop {
    /// Opens a TCP connection to a numeric address. `completion` runs on this loop with the
    /// connection (set its handler; reading starts when the completion returns) or an error.
    /// Loop thread only.
    ///
    /// `sourceHost`, when given, is bound first (port 0) so the connection leaves from that
    /// address: a load generator spreads many connections over 127.0.0.x that way, since one
    /// source address has only ~28k ephemeral ports.
    public func connect(host: String, port: Int, sourceHost: String? = nil,
                        _ completion: @escaping (Result<TCPConnection, IOError>) -> Void) {
        assertInEventLoop()
        var address: sockaddr_storage
        var source: sockaddr_storage?
        do {
            address = try SocketAddress.make(host: host, port: port)
            if let sourceHost { source = try SocketAddress.make(host: sourceHost, port: 0) }
        } catch {
            completion(.failure(error))
            return
        }
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(uvLoop, handle)
        if var source {
            let bound = withUnsafePointer(to: &source) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(handle, $0, 0) }
            }
            if bound < 0 {
                uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { $0!.deallocate() }
                completion(.failure(IOError(uv: bound, "bind \(sourceHost ?? "")")))
                return
            }
        }
        let request = ConnectRequest(loop: self, handle: handle, completion: completion)
        let status = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                uv_tcp_connect(request.request, handle, sockaddr) { req, status in
                    let request = Unmanaged<ConnectRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
                    request.finish(status: status)
                }
            }
        }
        if status < 0 {
            Unmanaged<ConnectRequest>.fromOpaque(request.request.pointee.data).release()
            request.finish(status: status)
        }
    }
}

/// One `uv_tcp_connect` in flight.
final class ConnectRequest {
    let request: UnsafeMutablePointer<uv_connect_t>
    let loop: EventLoop
    let handle: UnsafeMutablePointer<uv_tcp_t>
    let completion: (Result<TCPConnection, IOError>) -> Void

    init(loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>,
         completion: @escaping (Result<TCPConnection, IOError>) -> Void) {
        self.loop = loop
        self.handle = handle
        self.completion = completion
        request = .allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    func finish(status: Int32) {
        if status < 0 {
            // A loop that stops cancels the connect after closing the handle itself.
            let raw = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
            if uv_is_closing(raw) == 0 { uv_close(raw) { $0!.deallocate() } }
            completion(.failure(IOError(uv: status, "connect")))
            return
        }
        uv_tcp_nodelay(handle, 1)
        let connection = TCPConnection(loop: loop, handle: handle)
        connection.isOutbound = true
        completion(.success(connection))
        if connection.handler == nil {
            connection.close(flush: false)
        } else {
            connection.startReading()
        }
    }

    deinit { request.deallocate() }
}
