//! How gantry reads its own inputs (the config file, the policy files, the token file): a
//! regular file only, opened without blocking, at most [`OWN_INPUT_CAP`] bytes. A config
//! replaced by a link to `/dev/zero` or by a FIFO is refused at once, instead of growing the
//! server without bound or hanging every call.

use std::io::Read as _;
use std::path::Path;

/// One version of a file as its metadata tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Modification time (which `touch -d` can set back).
    pub modified: std::time::SystemTime,
    /// Size in bytes.
    pub len: u64,
    /// Inode (0 where the platform shows none).
    pub inode: u64,
    /// Status-change time, seconds and nanoseconds: set by the kernel on every write or
    /// `touch`, and no program can set it back (0 where the platform shows none).
    pub changed: (i64, i64),
}

/// What identifies one version of a file (`None` when it does not exist).
pub type Stamp = Option<Version>;

/// The [`Stamp`] of `path` now.
pub fn file_stamp(path: &Path) -> Stamp {
    stamp_of(&std::fs::metadata(path).ok()?)
}

/// The [`Stamp`] of a file whose metadata is at hand.
pub(crate) fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let (inode, changed) = {
        use std::os::unix::fs::MetadataExt as _;
        (m.ino(), (m.ctime(), m.ctime_nsec()))
    };
    #[cfg(not(unix))]
    let (inode, changed) = (0, (0, 0));
    Some(Version {
        modified: m.modified().ok()?,
        len: m.len(),
        inode,
        changed,
    })
}

/// The largest input gantry reads of its own: far above any real config or policy file.
pub const OWN_INPUT_CAP: u64 = 1 << 20;

/// One of gantry's inputs, read whole.
#[derive(Debug, Clone)]
pub struct OwnInput {
    /// Its text.
    pub text: String,
    /// The version read, from the open file itself (not from its name a moment earlier).
    pub stamp: Stamp,
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OwnInputError {
    /// Nothing at that path (or a link pointing nowhere).
    #[error("it does not exist")]
    Missing,
    /// Something other than a regular file.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than [`OWN_INPUT_CAP`].
    #[error("it is larger than {} KiB", OWN_INPUT_CAP / 1024)]
    TooLarge,
    /// Not UTF-8 text.
    #[error("it is not UTF-8 text")]
    NotText,
    /// Any other failure.
    #[error("{0}")]
    Io(std::io::Error),
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}

/// Reads `path` (links followed) as one of gantry's own inputs.
pub fn read_own_input(path: &Path) -> Result<OwnInput, OwnInputError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // A FIFO opened for reading would wait for a writer; without blocking it opens at
        // once and is then refused by its type.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(OwnInputError::Missing),
        Err(e) => return Err(OwnInputError::Io(e)),
    };
    let meta = file.metadata().map_err(OwnInputError::Io)?;
    if !meta.is_file() {
        return Err(OwnInputError::NotRegular(kind(&meta)));
    }
    if meta.len() > OWN_INPUT_CAP {
        return Err(OwnInputError::TooLarge);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Bounded even if the file grows while it is read.
    (&file)
        .take(OWN_INPUT_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(OwnInputError::Io)?;
    if bytes.len() as u64 > OWN_INPUT_CAP {
        return Err(OwnInputError::TooLarge);
    }
    let text = String::from_utf8(bytes).map_err(|_| OwnInputError::NotText)?;
    Ok(OwnInput {
        text,
        stamp: stamp_of(&meta),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bounded_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "read_only = true\n").unwrap();
        let read = read_own_input(&file).unwrap();
        assert_eq!(read.text, "read_only = true\n");
        assert_eq!(read.stamp, crate::file_stamp(&file));

        assert!(matches!(
            read_own_input(&dir.path().join("none")),
            Err(OwnInputError::Missing)
        ));
        assert!(matches!(
            read_own_input(dir.path()),
            Err(OwnInputError::NotRegular("a directory"))
        ));
        std::fs::write(&file, vec![b'#'; (OWN_INPUT_CAP + 1) as usize]).unwrap();
        assert!(matches!(
            read_own_input(&file),
            Err(OwnInputError::TooLarge)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_device_or_a_fifo_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(
            read_own_input(&zero),
            Err(OwnInputError::NotRegular("a device"))
        ));
        let fifo = dir.path().join("fifo.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(
            read_own_input(&fifo),
            Err(OwnInputError::NotRegular("a FIFO"))
        ));
    }
}
