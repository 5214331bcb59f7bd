// A SwiftUI chat screen on ParleyClient's ChatRoomModel (Apple platforms only; this file is
// not part of the package build). Add the ParleyClient and ParleyCore products to an app
// target, then show `ChatView()`; point `url` at your server. Photos show as thumbnails (tap
// for full size), other files as download links; the paperclip sends a file.
#if canImport(SwiftUI)
import ParleyClient
import ParleyCore
import SwiftUI

struct ChatView: View {
    @State private var chat = ChatRoomModel(url: URL(string: "ws://127.0.0.1:8080/v3/websocket")!,
                                            channel: "demo", room: "observable-room")
    @State private var draft = ""
    @State private var choosingFile = false

    var body: some View {
        VStack(spacing: 0) {
            header
            ScrollViewReader { proxy in
                ScrollView {
                    LazyVStack(alignment: .leading, spacing: 6) {
                        ForEach(chat.lines) { line in
                            LineView(line: line).id(line.id)
                        }
                    }
                    .padding()
                }
                .onChange(of: chat.lines.last?.id) { _, last in
                    if let last { withAnimation { proxy.scrollTo(last, anchor: .bottom) } }
                }
            }
            Text(chat.upload.map { "uploading \($0.name) \(Int($0.progress.fraction * 100))%" }
                 ?? (chat.typingText.isEmpty ? " " : chat.typingText))
                .font(.caption).italic().foregroundStyle(.secondary)
                .frame(maxWidth: .infinity, alignment: .leading).padding(.horizontal)
            HStack {
                Button { choosingFile = true } label: { Image(systemName: "paperclip") }
                    .fileImporter(isPresented: $choosingFile, allowedContentTypes: [.item]) { result in
                        guard case .success(let url) = result else { return }
                        let caption = draft
                        draft = ""
                        Task {
                            let scoped = url.startAccessingSecurityScopedResource()
                            defer { if scoped { url.stopAccessingSecurityScopedResource() } }
                            try? await chat.send(file: url, caption: caption)
                        }
                    }
                TextField("Message", text: $draft)
                    .textFieldStyle(.roundedBorder)
                    .onChange(of: draft) { _, text in chat.inputChanged(text) }
                    .onSubmit(send)
                Button("Send", action: send).disabled(draft.isEmpty)
            }
            .padding()
        }
        .task { try? await chat.start() }
        .onDisappear { Task { await chat.stop() } }
    }

    private var header: some View {
        HStack {
            Text("#\(chat.roomName)").bold()
            Spacer()
            Text("\(chat.members.count) online")
            Circle().fill(chat.connection == .connected ? .green : .orange).frame(width: 8, height: 8)
        }
        .padding()
        .background(.bar)
    }

    private func send() {
        let text = draft
        draft = ""
        Task { try? await chat.send(text) }
    }
}

private struct LineView: View {
    let line: ChatLine

    var body: some View {
        switch line.kind {
        case .notice:
            Text(line.text).font(.caption).foregroundStyle(.secondary).frame(maxWidth: .infinity)
        case .message, .history:
            HStack {
                if line.isMine { Spacer(minLength: 40) }
                VStack(alignment: line.isMine ? .trailing : .leading, spacing: 2) {
                    Text(line.name).font(.caption).foregroundStyle(Color(hex: line.color))
                    VStack(alignment: .leading, spacing: 6) {
                        if !line.text.isEmpty || line.attachments.isEmpty { Text(line.text) }
                        ForEach(line.attachments, id: \.self) { AttachmentView(attachment: $0) }
                    }
                    .padding(8)
                    .background(line.isMine ? Color.accentColor.opacity(0.2) : Color.gray.opacity(0.15),
                                in: RoundedRectangle(cornerRadius: 10))
                }
                .opacity(line.kind == .history(isMine: line.isMine) ? 0.7 : 1)
                if !line.isMine { Spacer(minLength: 40) }
            }
        }
    }
}

/// A photo as its thumbnail (tap: full size), any other file as a link to download it.
private struct AttachmentView: View {
    let attachment: Attachment
    @State private var showingFull = false

    var body: some View {
        if attachment.isImage, let thumbnail = attachment.thumbnail, let url = URL(string: thumbnail.url) {
            AsyncImage(url: url) { image in
                image.resizable().scaledToFit()
            } placeholder: {
                Color.gray.opacity(0.2)
            }
            .frame(maxWidth: min(240, CGFloat(thumbnail.width)))
            .aspectRatio(CGFloat(thumbnail.width) / CGFloat(max(1, thumbnail.height)), contentMode: .fit)
            .clipShape(RoundedRectangle(cornerRadius: 8))
            .onTapGesture { showingFull = true }
            .sheet(isPresented: $showingFull) {
                AsyncImage(url: URL(string: attachment.url)) { $0.resizable().scaledToFit() } placeholder: { ProgressView() }
                    .padding()
            }
        } else if let url = URL(string: attachment.url) {
            Link(destination: url) {
                Label("\(attachment.name) (\(ByteCount.humanReadable(attachment.size)))", systemImage: "doc")
            }
        }
    }
}

extension Color {
    /// `#RRGGBB` → Color (gray when malformed).
    init(hex: String) {
        let (r, g, b) = RandomIdentity.rgb(hex) ?? (128, 128, 128)
        self.init(red: Double(r) / 255, green: Double(g) / 255, blue: Double(b) / 255)
    }
}

#Preview { ChatView() }
#endif
