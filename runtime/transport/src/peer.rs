//! Which program is at the other end of a loopback connection: whether gantry started it (a
//! command the model ran must not be able to use the control page the user uses; a confined
//! command may read the page's address from the state directory), and whether it belongs to
//! a worker agent's own process tree (a worker's endpoint answers nothing else).
//!
//! Linux only (through `/proc`); elsewhere nothing is known and [`started_by_gantry`] says so.

use std::net::SocketAddr;

/// Why this process looks started by gantry (a command the model ran), or `None`: it or an
/// ancestor carries a command session's tag or is a `gantry serve`, or it runs in a gantry
/// command cgroup (of any gantry). A tripwire, like the control page's: a command that
/// detached itself (so that it is no one's child), cleared its tag and left its cgroup looks
/// like any program of the user's.
pub fn this_process_started_by_gantry() -> Option<String> {
    if std::env::var_os(terminal::process_tree::TAG_VAR).is_some() {
        return Some("it carries a gantry command session's tag".into());
    }
    #[cfg(target_os = "linux")]
    {
        linux::process_started_by_gantry(std::process::id(), None)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Why a connection cannot be trusted as the user's own, or `None` when it can.
///
/// `peer` is the client's address as the server sees it, `local` the server's. The program
/// that opened it is judged by [`this_process_started_by_gantry`]'s rules, any gantry's
/// commands alike (a model under a stdio gantry must not use an HTTP gantry's page).
pub fn started_by_gantry(peer: SocketAddr, local: SocketAddr) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        linux::started_by_gantry(peer, local)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (peer, local);
        None
    }
}

/// The process that opened the loopback connection `peer` → `local`, where `/proc` shows it.
pub fn opener(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        linux::inode_of(peer, local).and_then(linux::holder_of)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (peer, local);
        None
    }
}

/// Why a connection opened by `opener` is not from a descendant of `root` (or `root`
/// itself), or `None` when it is. Ancestry, not cgroup membership: any process of the user
/// can move itself into a cgroup the user owns, but none can make itself another's child.
/// On Linux a connection whose opener is unknown is refused; elsewhere nothing can be known
/// and none is refused.
pub fn outside_tree(opener: Option<u32>, root: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let Some(pid) = opener else {
            return Some("cannot tell which program opened the connection".into());
        };
        let mut at = pid;
        for _ in 0..256 {
            if at == root {
                return None;
            }
            match linux::parent_of(at) {
                Some(parent) if parent != 0 && parent != at => at = parent,
                _ => break,
            }
        }
        Some(format!("process {pid} is not part of it"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (opener, root);
        None
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::path::Path;

    /// `0100007F:1F90` (the IPv4 address's bytes as the kernel holds them, printed as a native
    /// integer; the port in hex) as an address.
    fn parse_v4(field: &str) -> Option<SocketAddr> {
        let (ip, port) = field.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        let port = u16::from_str_radix(port, 16).ok()?;
        Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::from(ip.to_ne_bytes())),
            port,
        ))
    }

    /// The socket inode of the client's end of the connection `peer` → `local`.
    pub(super) fn inode_of(peer: SocketAddr, local: SocketAddr) -> Option<u64> {
        let table = terminal::procfs::tcp4_table()?;
        table.lines().skip(1).find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (from, to, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
            (parse_v4(from)? == peer && parse_v4(to)? == local)
                .then(|| inode.parse().ok())
                .flatten()
        })
    }

    /// The process holding socket `inode` open.
    pub(super) fn holder_of(inode: u64) -> Option<u32> {
        terminal::procfs::socket_holder(inode).and_then(|p| u32::try_from(p).ok())
    }

    pub(super) fn parent_of(pid: u32) -> Option<u32> {
        let stat = terminal::procfs::stat(i32::try_from(pid).ok()?)?;
        u32::try_from(stat.ppid).ok()
    }

    /// Whether `pid` is a `gantry serve` (its program named gantry, its first argument
    /// `serve`).
    fn is_gantry_server(pid: u32) -> bool {
        let Some(args) = i32::try_from(pid).ok().and_then(terminal::procfs::cmdline) else {
            return false;
        };
        let program = args
            .first()
            .map(|a| String::from_utf8_lossy(a).into_owned());
        let named_gantry = program.as_deref().is_some_and(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("gantry"))
        });
        named_gantry && args.get(1).is_some_and(|a| a == b"serve")
    }

    /// Why `pid` looks started by gantry: it is `me` (this server) or descends from it, it or
    /// an ancestor carries a command session's tag or is a `gantry serve`, or it runs in a
    /// gantry command cgroup.
    pub fn process_started_by_gantry(pid: u32, me: Option<u32>) -> Option<String> {
        let in_command_cgroup = i32::try_from(pid)
            .ok()
            .and_then(|p| terminal::procfs::cgroup(p).ok())
            .is_some_and(|c| {
                c.lines()
                    .any(|l| l.split('/').any(|part| part.starts_with("gantry.")))
            });
        if in_command_cgroup {
            return Some(format!("process {pid} runs in a gantry command cgroup"));
        }
        let tag = format!("{}=", terminal::process_tree::TAG_VAR).into_bytes();
        let mut at = pid;
        for _ in 0..256 {
            if Some(at) == me {
                return Some(format!("process {pid} was started by gantry"));
            }
            if i32::try_from(at)
                .ok()
                .and_then(terminal::procfs::environ)
                .is_some_and(|env| env.iter().any(|kv| kv.starts_with(&tag)))
            {
                return Some(format!(
                    "process {pid} or its parent {at} carries a gantry command session's tag"
                ));
            }
            if at != std::process::id() && is_gantry_server(at) {
                return Some(format!(
                    "process {pid} descends from a gantry server (process {at})"
                ));
            }
            match parent_of(at) {
                // gantry may itself be pid 1 (a container): walk until there is no parent.
                Some(parent) if parent != 0 && parent != at => at = parent,
                _ => break,
            }
        }
        None
    }

    pub fn started_by_gantry(peer: SocketAddr, local: SocketAddr) -> Option<String> {
        if !peer.ip().is_loopback() {
            return Some("the connection is not from this machine".into());
        }
        let Some(pid) = inode_of(peer, local).and_then(holder_of) else {
            return Some(
                "cannot tell which program opened the connection (/proc does not show it), so it is not trusted".into(),
            );
        };
        process_started_by_gantry(pid, Some(std::process::id()))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_kernels_addresses_read_as_written() {
            assert_eq!(
                parse_v4("0100007F:1F90"),
                Some("127.0.0.1:8080".parse().unwrap())
            );
            assert_eq!(parse_v4("nonsense"), None);
        }

        #[test]
        fn a_connection_of_this_process_is_found_and_refused_as_gantrys_own() {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (_server_side, peer) = listener.accept().unwrap();
            let why = started_by_gantry(peer, listener.local_addr().unwrap());
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains(&std::process::id().to_string())),
                "{why:?}"
            );
            drop(client);
        }
    }
}
