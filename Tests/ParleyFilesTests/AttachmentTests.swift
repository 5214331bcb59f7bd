import ParleyCore
import Testing
@testable import ParleyFiles

@Suite struct AttachmentModelTests {
    let cat = Attachment(id: "u1", url: "/files/ab/cat.jpg", name: "cat.jpg", mime: "image/jpeg", size: 1_234_567,
                         width: 4032, height: 3024,
                         thumbnail: .init(url: "/files/cd/cat.webp", width: 480, height: 360))
    let pdf = Attachment(id: "u2", url: "http://h/files/ef/report.pdf", name: "report.pdf", mime: "application/pdf", size: 52_000)

    @Test func jsonShapeAndRoundTrip() throws {
        #expect(cat.jsonValue.jsonString == #"{"id":"u1","url":"/files/ab/cat.jpg","name":"cat.jpg","mime":"image/jpeg","size":1234567,"width":4032,"height":3024,"thumbnail":{"url":"/files/cd/cat.webp","width":480,"height":360}}"#)
        #expect(pdf.jsonValue.jsonString == #"{"id":"u2","url":"http://h/files/ef/report.pdf","name":"report.pdf","mime":"application/pdf","size":52000}"#)
        for attachment in [cat, pdf] {
            let parsed = try Attachment(json: try JSONParser.parse(attachment.jsonValue.jsonString))
            #expect(parsed == attachment)
        }
        #expect(cat.isImage && cat.kind == "image")
        #expect(!pdf.isImage && pdf.kind == "file")
        let svg = Attachment(id: "s", url: "/s", name: "a.svg", mime: "image/svg+xml", size: 1, width: 10, height: 10)
        #expect(!svg.isImage)
    }

    @Test func invalidAttachmentsAreRefusedWithAReason() throws {
        func refused(_ json: String) -> ParleyError? {
            do {
                _ = try Attachment(json: try JSONParser.parse(json))
                return nil
            } catch let error as ParleyError {
                return error
            } catch {
                return nil
            }
        }
        let valid = #"{"id":"a","url":"/f","name":"n","mime":"text/plain","size":1}"#
        #expect(refused(valid) == nil)
        for bad in [
            #"[]"#,
            #"{"url":"/f","name":"n","mime":"text/plain","size":1}"#,
            #"{"id":"a b","url":"/f","name":"n","mime":"text/plain","size":1}"#,
            #"{"id":"a","url":"/f g","name":"n","mime":"text/plain","size":1}"#,
            #"{"id":"a","url":"/f","name":"line\nbreak","mime":"text/plain","size":1}"#,
            #"{"id":"a","url":"/f","name":"","mime":"text/plain","size":1}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"textplain","size":1}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"text/plain","size":-1}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"text/plain","size":1.5}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"image/png","size":1,"width":10}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"image/png","size":1,"width":0,"height":1}"#,
            #"{"id":"a","url":"/f","name":"n","mime":"image/png","size":1,"width":1,"height":1,"thumbnail":{"url":"/t"}}"#,
            #"{"id":"a","url":"/f","name":"n\u202Egpj.exe","mime":"text/plain","size":1}"#,
        ] {
            let error = refused(bad)
            #expect(error?.code == .badRequest, "\(bad)")
        }
    }

    @Test func messageBodiesAreClassified() throws {
        #expect(AttachmentMessage.classify("just text") == .plain)
        #expect(AttachmentMessage.classify(["text": "hi"]) == .plain)
        let body = AttachmentMessage(text: "look", attachments: [cat, pdf])
        #expect(body.jsonValue.jsonString.hasPrefix(#"{"text":"look","attachments":[{"id":"u1""#))
        #expect(AttachmentMessage.classify(body.jsonValue) == .attachments(body))
        let noCaption = AttachmentMessage(attachments: [pdf])
        #expect(AttachmentMessage.classify(noCaption.jsonValue) == .attachments(noCaption))
        #expect(AttachmentMessage.classify(["text": .null, "attachments": [pdf.jsonValue]]) == .attachments(noCaption))
        // Extra members are allowed (apps add their own).
        if case .attachments = AttachmentMessage.classify(["attachments": [pdf.jsonValue], "replyTo": "m1"]) {} else {
            Issue.record("extra members refused")
        }
        for invalid: JSONValue in [
            ["attachments": []],
            ["attachments": "x"],
            ["attachments": .array(Array(repeating: pdf.jsonValue, count: 11))],
            ["text": 5, "attachments": [pdf.jsonValue]],
            ["attachments": [["id": "x"]]],
        ] {
            guard case .invalid(let error) = AttachmentMessage.classify(invalid) else {
                Issue.record("accepted \(invalid)")
                continue
            }
            #expect(error.code == .badRequest)
        }
    }

    @Test func doorsWithoutPicturesRenderText() {
        let body = AttachmentMessage(text: "look at this", attachments: [cat, pdf])
        #expect(body.lineDoorLines(baseURL: "http://h:8080") == [
            "look at this",
            "[image cat.jpg 1.2 MB] http://h:8080/files/ab/cat.jpg",
            "[file report.pdf 52 KB] http://h/files/ef/report.pdf",
        ])
        #expect(body.socketChatText(baseURL: "http://h:8080")
            == "look at this [image] http://h:8080/files/ab/cat.jpg [file] http://h/files/ef/report.pdf")
        let bare = AttachmentMessage(attachments: [cat])
        #expect(bare.lineDoorLines() == ["[image cat.jpg 1.2 MB] /files/ab/cat.jpg"])
        #expect(bare.socketChatText() == "[image] /files/ab/cat.jpg")
    }

    @Test(arguments: [
        (0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (1234, "1.2 KB"), (9949, "9.9 KB"), (9950, "10 KB"),
        (52_000, "52 KB"), (999_499, "999 KB"), (999_500, "1.0 MB"), (1_234_567, "1.2 MB"), (1_048_576, "1.0 MB"),
        (10_485_760, "10 MB"), (5_000_000_000, "5.0 GB"), (-3, "0 B"),
    ])
    func humanReadableSizes(bytes: Int, text: String) {
        #expect(ByteCount.humanReadable(bytes) == text)
    }
}

@Suite struct AttachmentPipelineTests {
    func withPipeline(_ body: (AttachmentPipeline) throws -> Void) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pipeline = AttachmentPipeline(store: try FileStore(directory: directory.path), images: try ImageProcessor())
        try body(pipeline)
    }

    @Test func photoUploadStoresCleanImageAndThumbnailOnly() throws {
        try withPipeline { pipeline in
            let photo = Fixture.withExif(Fixture.encode(Fixture.gradient(width: 1000, height: 600), as: .jpeg),
                                         Fixture.exif(orientation: 6))
            let upload = try pipeline.store.beginUpload(maxBytes: 10 << 20)
            var offset = 0
            while offset < photo.count {
                try upload.append(Array(photo[offset..<min(photo.count, offset + 8192)]))
                offset += 8192
            }
            let stored = try pipeline.ingest(try upload.finish(), claimedType: "image/jpeg")
            #expect(stored.source == .jpeg)
            #expect(stored.file.metadata.mime == "image/jpeg")
            #expect(stored.file.metadata.width == 600 && stored.file.metadata.height == 1000)
            let thumbnail = try #require(stored.thumbnail)
            #expect(stored.file.metadata.thumbnail == thumbnail.id)
            #expect(thumbnail.metadata == FileMetadata(mime: "image/webp", size: thumbnail.metadata.size, width: 288, height: 480))
            // Exactly two files: the uploaded original (with GPS) was never stored.
            #expect(Set(pipeline.store.storedFiles().map(\.id)) == [stored.file.id, thumbnail.id])
            #expect(pipeline.store.temporaryFileNames.isEmpty)
            for id in [stored.file.id, thumbnail.id] {
                let bytes = try pipeline.store.read(id)
                #expect(!Fixture.contains(bytes, Fixture.secret))
                #expect(!Fixture.contains(bytes, "Exif"))
            }

            let attachment = stored.attachment(id: "up1", name: stored.fileName(from: "IMG_1.jpg"),
                                               url: "/files/\(stored.file.id)", thumbnailURL: "/files/\(thumbnail.id)")
            #expect(attachment.width == 600 && attachment.thumbnail?.height == 480 && attachment.isImage)
            #expect(attachment.size == stored.file.metadata.size)
        }
    }

    @Test func heicUploadIsServedAsJPEGWithAJPEGName() throws {
        try #require(ImageProcessor.canEncodeHEIC)
        try withPipeline { pipeline in
            let heic = Fixture.encode(Fixture.gradient(width: 320, height: 240), as: .heic, quality: 50)
            let stored = try pipeline.ingest(bytes: heic, claimedType: "image/heic")
            #expect(stored.source == .heic)
            #expect(stored.file.metadata.mime == "image/jpeg")
            #expect(stored.fileName(from: "IMG_0001.HEIC") == "IMG_0001.jpg")
            #expect(stored.fileName(from: "noextension") == "noextension.jpg")
        }
    }

    @Test func otherFilesAreStoredAsUploaded() throws {
        try withPipeline { pipeline in
            let pdf = Array("%PDF-1.4\n%âãÏÓ\n1 0 obj\n<<>>\nendobj\n".utf8)
            let stored = try pipeline.ingest(bytes: pdf, claimedType: "application/pdf")
            #expect(stored.thumbnail == nil && stored.source == nil)
            #expect(try pipeline.store.read(stored.file.id) == pdf)
            #expect(stored.fileName(from: "C:\\fakepath\\report.pdf") == "report.pdf")
            let response = DownloadResponse(id: stored.file.id, metadata: stored.file.metadata, name: "report.pdf")
            #expect(response.header("Content-Disposition")?.hasPrefix("attachment;") == true)
        }
    }

    @Test func refusalsLeaveNothingBehind() throws {
        try withPipeline { pipeline in
            func attempt(_ bytes: [UInt8], _ claim: String?) -> FileError? {
                do {
                    let upload = try pipeline.store.beginUpload(maxBytes: 1 << 20)
                    try upload.append(bytes)
                    _ = try pipeline.ingest(try upload.finish(), claimedType: claim)
                    return nil
                } catch {
                    return error
                }
            }
            let truncated = Array(Fixture.encode(Fixture.gradient(width: 200, height: 200), as: .jpeg).prefix(3000))
            #expect(attempt(truncated, "image/jpeg")?.code == .invalidImage)
            #expect(attempt(Fixture.pngBomb(width: 50_000, height: 50_000), "image/png")?.code == .tooLarge)
            #expect(attempt(Array("not a png".utf8), "image/png")?.code == .invalidImage)
            #expect(attempt(Array("<svg><script>alert(1)</script></svg>".utf8), "image/svg+xml")?.code == .unsupportedType)
            #expect(pipeline.store.storedFiles().isEmpty)
            #expect(pipeline.store.temporaryFileNames.isEmpty)
        }
    }
}
