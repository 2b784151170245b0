//! Which addresses a client document may be fetched from: those reachable from the public
//! internet, so a URL named by anyone cannot make gantry call a service on this machine or
//! its network.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                      // "this network"
        || a == 10                                // private
        || a == 127                               // loopback
        || (a == 100 && (64..128).contains(&b))   // shared (carrier NAT)
        || (a == 169 && b == 254)                 // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))    // private
        || (a == 192 && b == 0 && c == 0)         // protocol assignments
        || (a == 192 && b == 0 && c == 2)         // documentation
        || (a == 192 && b == 88 && c == 99)       // 6to4 relay
        || (a == 192 && b == 168)                 // private
        || (a == 198 && (18..20).contains(&b))    // benchmarking
        || (a == 198 && b == 51 && c == 100)      // documentation
        || (a == 203 && b == 0 && c == 113)       // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // Global unicast only (2000::/3), less the ranges inside it that lead elsewhere or
    // nowhere: documentation, Teredo and 6to4 (which embed an IPv4 address of any kind), and
    // ORCHID.
    (s[0] & 0xe000) == 0x2000
        && !(s[0] == 0x2001 && s[1] == 0x0db8)
        && !(s[0] == 0x2001 && s[1] == 0x0000)
        && !(s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0010)
        && !(s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0020)
        && s[0] != 0x2002
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_pass() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "203.0.113.9",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2001:0:4136:e378::1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "192.169.0.1",
            "104.18.32.47",
            "::ffff:1.1.1.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:82a::200e",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
