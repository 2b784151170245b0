//! The user's other machines over the system's OpenSSH client: the command lines, the host
//! keys gantry pins, the copy of this binary to a machine, and what a failure means.

mod digest;
mod install;
mod pinning;
mod ssh;

pub use digest::sha256_hex;
pub use install::{InstallError, install};
pub use pinning::{HostKey, PinError, pattern, pin, pinned, scan, unpin};
pub use ssh::{Failure, Machine, Sharing, explain, known_hosts};
