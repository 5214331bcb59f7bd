import Foundation
import ParleyCore

/// An upload-and-publish in progress: iterate ``progress`` while it runs, await ``value`` for
/// the publish receipt, or ``cancel()`` it.
public final class FilePublish: Sendable {
    /// Bytes sent so far; finishes when the upload does.
    public let progress: AsyncStream<UploadProgress>
    private let task: Task<Result<PublishAck, ParleyClientError>, Never>

    init(progress: AsyncStream<UploadProgress>, task: Task<Result<PublishAck, ParleyClientError>, Never>) {
        self.progress = progress
        self.task = task
    }

    /// The receipt of the message that carries the file.
    public var value: PublishAck {
        get async throws(ParleyClientError) { try await task.value.get() }
    }

    /// Stops the upload (the server discards what it received); ``value`` then throws.
    public func cancel() { task.cancel() }
}

extension Room {
    /// Uploads a file from disk and publishes it in this room as `{"text": caption,
    /// "attachments": [...]}`. `name` defaults to the file's name, `mime` to a guess from the
    /// name (the server checks the bytes either way). `progress` is called as bytes go out.
    @discardableResult
    public func publish(file: URL, name: String? = nil, mime: String? = nil, caption: String? = nil,
                        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws(ParleyClientError) -> PublishAck {
        try await publish(.file(file), name: name ?? file.lastPathComponent, mime: mime, caption: caption, progress: progress)
    }

    /// Uploads bytes as a file named `name` and publishes it in this room.
    @discardableResult
    public func publish(file: Data, name: String, mime: String? = nil, caption: String? = nil,
                        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws(ParleyClientError) -> PublishAck {
        try await publish(.data(file), name: name, mime: mime, caption: caption, progress: progress)
    }

    /// Starts uploading and publishing `source`; the returned ``FilePublish`` streams the
    /// progress.
    public func startPublishing(_ source: UploadSource, name: String, mime: String? = nil,
                                caption: String? = nil) -> FilePublish {
        let (stream, continuation) = AsyncStream.makeStream(of: UploadProgress.self, bufferingPolicy: .bufferingNewest(16))
        let task = Task { () -> Result<PublishAck, ParleyClientError> in
            defer { continuation.finish() }
            do throws(ParleyClientError) {
                return .success(try await publish(source, name: name, mime: mime, caption: caption) { continuation.yield($0) })
            } catch {
                return .failure(error)
            }
        }
        return FilePublish(progress: stream, task: task)
    }

    /// Publishes files already uploaded (``ParleyClient/upload(_:name:mime:room:progress:)``),
    /// with an optional caption.
    @discardableResult
    public func publish(attachments: [Attachment], caption: String? = nil) async throws(ParleyClientError) -> PublishAck {
        try await client.publish(AttachmentMessage(text: caption, attachments: attachments).jsonValue, to: name)
    }

    private func publish(_ source: UploadSource, name fileName: String, mime: String?, caption: String?,
                         progress: @escaping @Sendable (UploadProgress) -> Void) async throws(ParleyClientError) -> PublishAck {
        let attachment = try await client.upload(source, name: fileName, mime: mime, room: name, progress: progress)
        return try await publish(attachments: [attachment], caption: caption)
    }
}
