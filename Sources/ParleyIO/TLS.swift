import COpenSSL

/// TLS settings shared by many connections: an OpenSSL `SSL_CTX` (TLS 1.2 or newer,
/// OpenSSL's default secure cipher list).
public final class TLSContext: @unchecked Sendable {
    // Safe to share: the SSL_CTX is fully configured in `init` and never changed afterwards;
    // OpenSSL documents creating SSL objects from a configured SSL_CTX as thread-safe.
    let context: OpaquePointer
    public let isServer: Bool
    /// For clients: the name to verify the server's certificate against (nil = no check).
    let verifyPeer: Bool

    /// A server context from PEM files.
    public init(certificateChainFile: String, privateKeyFile: String) throws(IOError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSContext.lastError("SSL_CTX_new") }
        self.context = context
        isServer = true
        verifyPeer = false
        parley_ssl_ctx_min_tls12(context)
        try Self.use(certificate: certificateChainFile, key: privateKeyFile, in: context, named: "TLS")
    }

    /// Loads a PEM certificate chain and its private key into `context`, checked to match.
    private static func use(certificate: String, key: String, in context: OpaquePointer, named what: String) throws(IOError) {
        guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
            throw TLSContext.lastError("cannot load \(what) certificate \(certificate)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1 else {
            throw TLSContext.lastError("cannot load \(what) private key \(key)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSContext.lastError("\(what) private key \(key) does not match the certificate")
        }
    }

    /// A client context: verifies servers against `caFile` (PEM), or the system's trust store
    /// when nil; presents `certificateFile` (a PEM chain) with `privateKeyFile` when the server
    /// asks for a client certificate (both, or neither).
    public init(clientTrusting caFile: String? = nil, certificateFile: String? = nil, privateKeyFile: String? = nil) throws(IOError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSContext.lastError("SSL_CTX_new") }
        self.context = context
        isServer = false
        verifyPeer = true
        parley_ssl_ctx_min_tls12(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else { throw TLSContext.lastError("cannot load trusted certificates \(caFile ?? "(system)")") }
        switch (certificateFile, privateKeyFile) {
        case (nil, nil):
            break
        case (let certificate?, let key?):
            try Self.use(certificate: certificate, key: key, in: context, named: "TLS client")
        default:
            throw IOError(message: "a client certificate needs its private key, and the key its certificate")
        }
    }

    deinit { SSL_CTX_free(context) }

    static func lastError(_ what: String) -> IOError {
        let code = ERR_get_error()
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return IOError(message: "\(what): \(text)")
    }
}

/// One connection's TLS state, driven through memory BIOs: ciphertext in from the socket,
/// plaintext out to the handler, and the reverse for writes. Confined to the connection's loop.
final class TLSSession {
    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer   // ciphertext from the peer
    private let writeBIO: OpaquePointer  // ciphertext to the peer
    private(set) var handshakeDone = false
    /// Plaintext written before the handshake finished.
    private var pendingPlaintext: [IOBuffer] = []

    init(context: TLSContext, serverName: String?) throws(IOError) {
        guard let ssl = SSL_new(context.context) else { throw TLSContext.lastError("SSL_new") }
        self.ssl = ssl
        readBIO = BIO_new(BIO_s_mem())
        writeBIO = BIO_new(BIO_s_mem())
        SSL_set_bio(ssl, readBIO, writeBIO)
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            if let serverName {
                parley_ssl_set_host_name(ssl, serverName)
                SSL_set1_host(ssl, serverName)
            }
        }
    }

    deinit { SSL_free(ssl) }  // frees both BIOs

    enum Failure: Error { case tls(IOError) }

    /// Feeds ciphertext; returns plaintext for the handler and ciphertext to send back.
    func receive(_ ciphertext: UnsafeRawBufferPointer) throws(IOError) -> (plaintext: [UInt8], output: [UInt8]) {
        if ciphertext.count > 0 { BIO_write(readBIO, ciphertext.baseAddress, Int32(ciphertext.count)) }
        var plaintext: [UInt8] = []
        if !handshakeDone {
            let status = SSL_do_handshake(ssl)
            if status == 1 {
                handshakeDone = true
            } else {
                let error = SSL_get_error(ssl, status)
                if error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE {
                    let failure = TLSContext.lastError("TLS handshake failed")
                    // Send the alert, if any, before the caller closes.
                    throw IOError(message: failure.message + (drainOutput().isEmpty ? "" : " (alert sent)"))
                }
            }
        }
        if handshakeDone {
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
                if n > 0 {
                    plaintext.append(contentsOf: chunk[0..<Int(n)])
                    continue
                }
                let error = SSL_get_error(ssl, n)
                if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { break }
                if error == SSL_ERROR_ZERO_RETURN { break }  // close_notify: the socket EOF follows
                throw TLSContext.lastError("TLS read failed")
            }
        }
        var output = drainOutput()
        if handshakeDone && !pendingPlaintext.isEmpty {
            let queued = pendingPlaintext
            pendingPlaintext.removeAll()
            for buffer in queued { output += try encrypt(buffer) }
        }
        return (plaintext, output)
    }

    /// Encrypts application data; before the handshake completes it is held back.
    func send(_ buffer: IOBuffer) throws(IOError) -> [UInt8] {
        guard handshakeDone else {
            pendingPlaintext.append(buffer)
            return []
        }
        return try encrypt(buffer)
    }

    /// Starts a client handshake (the ClientHello).
    func start() -> [UInt8] {
        _ = SSL_do_handshake(ssl)
        return drainOutput()
    }

    /// A close_notify alert to send before closing.
    func shutdown() -> [UInt8] {
        guard handshakeDone else { return [] }
        SSL_shutdown(ssl)
        return drainOutput()
    }

    private func encrypt(_ buffer: IOBuffer) throws(IOError) -> [UInt8] {
        let status = buffer.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard status > 0 else { throw TLSContext.lastError("TLS write failed") }
        return drainOutput()
    }

    private func drainOutput() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(writeBIO))
        guard pending > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: pending)
        let n = out.withUnsafeMutableBytes { BIO_read(writeBIO, $0.baseAddress, Int32(pending)) }
        return n > 0 ? Array(out[0..<Int(n)]) : []
    }
}
