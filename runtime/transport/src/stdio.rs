//! The stdio transport's byte streams.
//!
//! tokio's `stdin()`/`stdout()` do every read and write on the blocking thread pool: two
//! thread hops per call, which on a small `read` cost more than the call itself. MCP hosts
//! start a stdio server with pipes (or, from Node, a socket pair), which the reactor can poll
//! directly, so those are driven without any hop. Anything else (a terminal, a file) keeps
//! tokio's portable streams.

use tokio::io::{AsyncRead, AsyncWrite};

/// The server's input stream.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// The server's output stream.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout as async streams; must be called inside the runtime. Call
/// [`restore_blocking`] once serving ends.
pub fn streams() -> (Input, Output) {
    #[cfg(unix)]
    if let Some((input, output)) = polled::streams() {
        tracing::debug!("stdio: pipes polled by the reactor");
        return (Box::new(input), Box::new(output));
    }
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// Puts stdin and stdout back in blocking mode if [`streams`] changed them: the mode belongs to
/// the open pipe, which the process that started gantry may go on using (`(gantry ...; echo
/// done) | cat`).
pub fn restore_blocking() {
    #[cfg(unix)]
    polled::restore();
}

/// Calls [`restore_blocking`] when dropped, so a panic unwinding out of serving restores the
/// pipes too.
#[derive(Debug)]
pub struct RestoreOnDrop;

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        restore_blocking();
    }
}

#[cfg(unix)]
mod polled {
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{FileType, fstat};
    use tokio::net::unix::pipe::{Receiver, Sender};

    /// Whether `fd` is a pipe or socket, and which one (device, inode).
    fn pollable(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
        let st = fstat(fd).ok()?;
        matches!(
            FileType::from_raw_mode(st.st_mode),
            FileType::Fifo | FileType::Socket
        )
        .then_some((st.st_dev as u64, st.st_ino as u64))
    }

    /// Whether stdin and stdout were put in non-blocking mode by us (a pipe handed over
    /// already non-blocking is left as it came).
    static CHANGED_IN: AtomicBool = AtomicBool::new(false);
    static CHANGED_OUT: AtomicBool = AtomicBool::new(false);

    pub(super) fn restore() {
        if CHANGED_IN.swap(false, Ordering::SeqCst) {
            let _ = rustix::io::ioctl_fionbio(std::io::stdin().as_fd(), false);
        }
        if CHANGED_OUT.swap(false, Ordering::SeqCst) {
            let _ = rustix::io::ioctl_fionbio(std::io::stdout().as_fd(), false);
        }
    }

    fn non_blocking(fd: BorrowedFd<'_>) -> Option<bool> {
        Some(
            rustix::fs::fcntl_getfl(fd)
                .ok()?
                .contains(rustix::fs::OFlags::NONBLOCK),
        )
    }

    pub(super) fn streams() -> Option<(Receiver, Sender)> {
        let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        let input = pollable(stdin.as_fd())?;
        let output = pollable(stdout.as_fd())?;
        // Non-blocking mode belongs to the open pipe, not to the descriptor: when stderr is
        // the same pipe as stdout (`2>&1`), blocking log writes would start failing.
        let err = pollable(stderr.as_fd());
        if err == Some(output) || err == Some(input) || input == output {
            return None;
        }
        let was_in = non_blocking(stdin.as_fd())?;
        let was_out = non_blocking(stdout.as_fd())?;
        let input: OwnedFd = stdin.as_fd().try_clone_to_owned().ok()?;
        let output: OwnedFd = stdout.as_fd().try_clone_to_owned().ok()?;
        rustix::io::ioctl_fionbio(&input, true).ok()?;
        // A big reply (a 256 KB file is over 512 KB of JSON) otherwise crosses a 64 KB pipe
        // in many write/wake-up rounds. Best effort, and only ever growing the pipe: a socket
        // or a lower system limit keeps what it has.
        #[cfg(target_os = "linux")]
        if rustix::pipe::fcntl_getpipe_size(&output).is_ok_and(|n| n < 1 << 20) {
            let _ = rustix::pipe::fcntl_setpipe_size(&output, 1 << 20);
        }
        if rustix::io::ioctl_fionbio(&output, true).is_err() {
            // Leave stdin as it was so the portable fallback can still read it.
            let _ = rustix::io::ioctl_fionbio(&input, was_in);
            return None;
        }
        match (
            Receiver::from_owned_fd_unchecked(input),
            Sender::from_owned_fd_unchecked(output),
        ) {
            (Ok(r), Ok(s)) => {
                CHANGED_IN.store(!was_in, Ordering::SeqCst);
                CHANGED_OUT.store(!was_out, Ordering::SeqCst);
                Some((r, s))
            }
            _ => {
                // Registration failed and the duplicates are closed; undo the mode on the
                // originals for the fallback.
                let _ = rustix::io::ioctl_fionbio(stdin.as_fd(), was_in);
                let _ = rustix::io::ioctl_fionbio(stdout.as_fd(), was_out);
                None
            }
        }
    }
}
