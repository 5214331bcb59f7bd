import Foundation

/// What the process uses, read at scrape time from the kernel (`/proc/self` on Linux,
/// `getrusage` / `getrlimit` everywhere). Values that cannot be read are nil and left out.
struct ProcessStatistics {
    var residentBytes: Int?
    var virtualBytes: Int?
    var openFileDescriptors: Int?
    var maxFileDescriptors: Int?
    var cpuSeconds: Double?
    var threads: Int?

    static func read() -> ProcessStatistics {
        var statistics = ProcessStatistics()
        #if os(Linux)
        // statm: size resident shared text lib data dt, in pages.
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let fields = statm.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            if fields.count >= 2 {
                statistics.virtualBytes = fields[0] * page
                statistics.residentBytes = fields[1] * page
            }
        }
        if let directory = opendir("/proc/self/fd") {
            var count = 0
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(2)) }
                if name.first != UInt8(ascii: ".") { count += 1 }
            }
            closedir(directory)
            statistics.openFileDescriptors = max(0, count - 1)  // the directory's own descriptor
        }
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) {
            statistics.threads = Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
        }
        #endif
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            statistics.maxFileDescriptors = Int(limit.rlim_cur)
        }
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            statistics.cpuSeconds = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        }
        return statistics
    }
}
