import ParleyCore
import Testing

/// Addresses, ranges and the per-IP limit key (ParleyCore/Support/IPAddress.swift).
struct IPAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "0.0.0.0"), ("255.255.255.255", "255.255.255.255"),
        ("::1", "::1"), ("::", "::"), ("2001:DB8::1", "2001:db8::1"), ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"), ("fe80::1:2", "fe80::1:2"), ("1::", "1::"),
        ("::ffff:192.0.2.1", "192.0.2.1"), ("::ffff:c000:201", "192.0.2.1"), ("64:ff9b::192.0.2.1", "64:ff9b::c000:201"),
    ])
    func parsesAndSpellsOneWay(text: String, spelled: String) {
        #expect(IPAddress(parsing: text)?.description == spelled)
    }

    @Test(arguments: ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ", "a.b.c.d", ":::", "1:2:3:4:5:6:7:8:9",
                      "1::2::3", "12345::", "::g", "1:2:3:4:5:6:7::8:9", "[::1]", "::1%eth0", "1.2.3.4:80", "localhost",
                      String(repeating: "1", count: 60)])
    func refusesWhatIsNotAnAddress(text: String) {
        #expect(IPAddress(parsing: text) == nil)
    }

    @Test func limitKeyGroupsIPv6ByItsSlash64() {
        #expect(IPAddress.limitKey("203.0.113.9") == "203.0.113.9")
        #expect(IPAddress.limitKey("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(IPAddress.limitKey("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64")
        #expect(IPAddress.limitKey("2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(IPAddress.limitKey("::ffff:203.0.113.9") == "203.0.113.9")
        #expect(IPAddress.limitKey("not an address") == "not an address")
    }

    @Test func networks() {
        let ten = IPNetwork(parsing: "10.0.0.0/8")!
        #expect(ten.contains(IPAddress(parsing: "10.255.1.2")!))
        #expect(!ten.contains(IPAddress(parsing: "11.0.0.1")!))
        #expect(!ten.contains(IPAddress(parsing: "::a00:1")!))
        #expect(ten.contains(IPAddress(parsing: "::ffff:10.0.0.1")!))
        let one = IPNetwork(parsing: "192.0.2.7")!
        #expect(one.contains(IPAddress(parsing: "192.0.2.7")!) && !one.contains(IPAddress(parsing: "192.0.2.8")!))
        let v6 = IPNetwork(parsing: "2001:db8::/33")!
        #expect(v6.contains(IPAddress(parsing: "2001:db8:7fff::1")!) && !v6.contains(IPAddress(parsing: "2001:db8:8000::1")!))
        #expect(IPNetwork(parsing: "0.0.0.0/0")!.contains(IPAddress(parsing: "8.8.8.8")!))
        #expect(IPNetwork(parsing: "::ffff:10.0.0.0/104")!.contains(IPAddress(parsing: "10.1.2.3")!))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "::/129", "x/8", "10.0.0.0/8/8", "::ffff:10.0.0.0/95"] {
            #expect(IPNetwork(parsing: bad) == nil, "\(bad)")
        }
    }
}
