//! Opening, writing and removing files *beneath* an approved root without following any
//! symlink on the way, so a path that was checked cannot be redirected between the check and
//! the write (TOCTOU).
//!
//! Unix: every directory from the root down is opened with `openat(O_DIRECTORY|O_NOFOLLOW)`
//! relative to the previous one, and the file itself is created, renamed or unlinked relative
//! to that last descriptor. A directory swapped for a symlink after the check makes the open
//! fail with `ELOOP`/`ENOTDIR`; nothing is written outside the root.
//!
//! Windows (no `openat`): the parent is re-resolved and re-checked against the root right
//! before the write and the rename. This narrows the window but does not close it; the README
//! says so.

use std::io::{self, Write as _};
use std::path::{Component, Path, PathBuf};

/// A path split into the root it lies under and the components below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchored {
    /// The canonical root.
    pub root: PathBuf,
    /// The directories between the root and the file.
    pub dirs: Vec<std::ffi::OsString>,
    /// The file name (empty when the path is the root itself).
    pub name: std::ffi::OsString,
}

impl Anchored {
    /// Splits canonical `path` under `root` (which must contain it).
    pub fn new(root: &Path, path: &Path) -> io::Result<Anchored> {
        let rel = path
            .strip_prefix(root)
            .map_err(|_| io::Error::other("path is not under its root"))?;
        let mut parts: Vec<std::ffi::OsString> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(p) => parts.push(p.to_os_string()),
                // A canonical path has no `.`, `..` or prefix below its root.
                _ => return Err(io::Error::other("path is not canonical")),
            }
        }
        let name = parts.pop().unwrap_or_default();
        Ok(Anchored {
            root: root.to_path_buf(),
            dirs: parts,
            name,
        })
    }
}

/// The error for a new file's path where something appeared after it was checked.
fn appeared() -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        "something appeared at the path after it was checked; it was left as it is",
    )
}

/// The error for an open file that is one of gantry's own by another name.
fn own_by_another_name() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "it is one of gantry's own files by another name",
    )
}

/// The error for a path that stopped being what was checked.
fn moved_under_us() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a directory on the path was replaced (symlink?) after it was checked",
    )
}

#[cfg(unix)]
mod imp {
    use std::os::fd::OwnedFd;

    use rustix::fs::{AtFlags, Mode, OFlags};
    use rustix::io::Errno;

    use super::*;

    fn map(e: Errno) -> io::Error {
        if e == Errno::LOOP || e == Errno::NOTDIR {
            moved_under_us()
        } else {
            io::Error::from(e)
        }
    }

    const DIR_FLAGS: OFlags = OFlags::DIRECTORY
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC)
        .union(OFlags::RDONLY);

    /// Opens the canonical `root` from `/`, one component at a time, never through a link:
    /// a root is canonical, so a link anywhere on its way (an ancestor swapped for a symbolic
    /// link by another program) means the root would be somewhere else, and is refused
    /// rather than followed. A component a call can use costs one `openat`.
    pub(crate) fn open_root(root: &Path) -> io::Result<OwnedFd> {
        // One call where the kernel has openat2 (Linux 5.6): it refuses a link anywhere on
        // the way by itself. Elsewhere, or where it is filtered out, component by component.
        #[cfg(target_os = "linux")]
        if root.is_absolute() {
            match rustix::fs::openat2(
                rustix::fs::CWD,
                root,
                DIR_FLAGS,
                Mode::empty(),
                rustix::fs::ResolveFlags::NO_SYMLINKS,
            ) {
                Ok(fd) => return Ok(fd),
                Err(Errno::NOSYS | Errno::PERM | Errno::INVAL) => {}
                Err(e) => return Err(map(e)),
            }
        }
        let mut fd = rustix::fs::open("/", DIR_FLAGS, Mode::empty()).map_err(map)?;
        for c in root.components() {
            match c {
                std::path::Component::RootDir => {}
                std::path::Component::Normal(name) => {
                    fd = rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty()).map_err(map)?;
                }
                // A canonical root has no `.`, `..` or prefix.
                _ => return Err(moved_under_us()),
            }
        }
        Ok(fd)
    }

    /// Refuses an open file that is one of gantry's own by another name (a hard link made or
    /// swapped in after its path was checked).
    pub(crate) fn refuse_own(stat: &rustix::fs::Stat) -> io::Result<()> {
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        let (dev, ino, links) = (stat.st_dev as u64, stat.st_ino as u64, stat.st_nlink as u64);
        if crate::own_identity::is_own_open((dev, ino), false, links) {
            return Err(own_by_another_name());
        }
        Ok(())
    }

    /// Opens the file's parent directory, creating missing directories when `create`.
    fn parent(a: &Anchored, create: bool) -> io::Result<OwnedFd> {
        let mut fd = open_root(&a.root)?;
        for d in &a.dirs {
            fd = match rustix::fs::openat(&fd, d.as_os_str(), DIR_FLAGS, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, d.as_os_str(), Mode::from_bits_truncate(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(map(e)),
                    }
                    rustix::fs::openat(&fd, d.as_os_str(), DIR_FLAGS, Mode::empty()).map_err(map)?
                }
                Err(e) => return Err(map(e)),
            };
        }
        Ok(fd)
    }

    /// Opens a regular file for reading; returns it and its permission bits.
    pub fn open_read(a: &Anchored) -> io::Result<(std::fs::File, u32, u64)> {
        let dir = parent(a, false)?;
        // O_NONBLOCK: should a FIFO have been swapped in, opening it must not hang.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&dir, a.name.as_os_str(), flags, Mode::empty()).map_err(map)?;
        let stat = rustix::fs::fstat(&fd).map_err(map)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(io::Error::other("not a regular file"));
        }
        refuse_own(&stat)?;
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        // `mode_t` is u32 on Linux and u16 on macOS: the same conversion is a no-op here.
        #[allow(clippy::useless_conversion)]
        let mode = u32::from(stat.st_mode & 0o7777);
        Ok((std::fs::File::from(fd), mode, size))
    }

    /// Writes `contents` to the file atomically: a temp file beside it, then a rename.
    pub fn write(a: &Anchored, contents: &[u8], mode: Option<u32>) -> io::Result<()> {
        write_then(a, contents, mode, |dir, tmp| {
            rustix::fs::renameat(dir, tmp, dir, a.name.as_os_str()).map_err(map)
        })
    }

    /// Writes `contents` to a new file atomically; a file (or anything) there already,
    /// even one made a moment ago, is left alone and the call fails with `AlreadyExists`.
    pub fn write_new(a: &Anchored, contents: &[u8]) -> io::Result<()> {
        write_then(a, contents, None, |dir, tmp| {
            let name = a.name.as_os_str();
            #[cfg(any(target_os = "linux", target_os = "android"))]
            let placed = match rustix::fs::renameat_with(
                dir,
                tmp,
                dir,
                name,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                // Filesystems without the flag (NFS, 9p, some FUSE) refuse it as such.
                Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                    link_in_place(dir, tmp, name)
                }
                other => other,
            };
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            let placed = link_in_place(dir, tmp, name);
            placed.map_err(|e| {
                if e == Errno::EXIST {
                    appeared()
                } else {
                    map(e)
                }
            })
        })
    }

    /// A hard link is never made over an existing name. Once it is made the file is in
    /// place, so the temp name's removal is best effort.
    fn link_in_place(
        dir: &OwnedFd,
        tmp: &std::ffi::OsStr,
        name: &std::ffi::OsStr,
    ) -> Result<(), Errno> {
        rustix::fs::linkat(dir, tmp, dir, name, AtFlags::empty())?;
        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
        Ok(())
    }

    /// Writes `contents` to a temp file beside the target, then `place`s it (the temp
    /// file is removed if anything fails).
    fn write_then(
        a: &Anchored,
        contents: &[u8],
        mode: Option<u32>,
        place: impl FnOnce(&OwnedFd, &std::ffi::OsStr) -> io::Result<()>,
    ) -> io::Result<()> {
        let dir = parent(a, true)?;
        let tmp = temp_name(&a.name);
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )
        .map_err(map)?;
        let result = (|| {
            if let Some(m) = mode {
                // A file's permission bits (0o7777) fit the raw mode of every platform
                // (u16 on macOS).
                #[allow(clippy::cast_possible_truncation, clippy::unnecessary_cast)]
                let raw = (m & 0o7777) as rustix::fs::RawMode;
                rustix::fs::fchmod(&fd, Mode::from_bits_truncate(raw)).map_err(map)?;
            }
            let mut file = std::fs::File::from(fd);
            file.write_all(contents)?;
            file.sync_all()?;
            place(&dir, tmp.as_os_str())
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_os_str(), AtFlags::empty());
        }
        result
    }

    /// Removes a regular file (never a directory, never through a symlink).
    pub fn remove(a: &Anchored) -> io::Result<()> {
        let dir = parent(a, false)?;
        let stat =
            rustix::fs::statat(&dir, a.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(map)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(io::Error::other("not a regular file"));
        }
        rustix::fs::unlinkat(&dir, a.name.as_os_str(), AtFlags::empty()).map_err(map)
    }

    /// Makes the directory; with `parents`, missing ones above it too, and one already
    /// there is fine. False when it was there already.
    pub fn make_dir(a: &Anchored, parents: bool) -> io::Result<bool> {
        let dir = parent(a, parents)?;
        match rustix::fs::mkdirat(&dir, a.name.as_os_str(), Mode::from_bits_truncate(0o777)) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) if parents => {
                let stat = rustix::fs::statat(&dir, a.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(map)?;
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::Directory
                {
                    Ok(false)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "something other than a directory is there",
                    ))
                }
            }
            Err(e) => Err(map(e)),
        }
    }

    /// Moves a regular file or a symbolic link (never a directory) to `to`, which must not
    /// exist; missing directories above `to` are made.
    pub fn move_entry(from: &Anchored, to: &Anchored) -> io::Result<()> {
        let src = parent(from, false)?;
        let stat = rustix::fs::statat(&src, from.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(map)?;
        let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
        if kind != rustix::fs::FileType::RegularFile && kind != rustix::fs::FileType::Symlink {
            return Err(io::Error::other("not a file or a symbolic link"));
        }
        let dst = parent(to, true)?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            rustix::fs::renameat_with(
                &src,
                from.name.as_os_str(),
                &dst,
                to.name.as_os_str(),
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(|e| {
                if e == Errno::EXIST {
                    io::Error::new(io::ErrorKind::AlreadyExists, "the destination exists")
                } else {
                    map(e)
                }
            })
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            if rustix::fs::statat(&dst, to.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the destination exists",
                ));
            }
            rustix::fs::renameat(&src, from.name.as_os_str(), &dst, to.name.as_os_str())
                .map_err(map)
        }
    }

    pub fn remove_link(a: &Anchored) -> io::Result<()> {
        let dir = parent(a, false)?;
        let stat =
            rustix::fs::statat(&dir, a.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(map)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Symlink {
            return Err(io::Error::other("not a symbolic link"));
        }
        rustix::fs::unlinkat(&dir, a.name.as_os_str(), AtFlags::empty()).map_err(map)
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    fn full(a: &Anchored) -> PathBuf {
        let mut p = a.root.clone();
        p.extend(&a.dirs);
        p.push(&a.name);
        p
    }

    /// Refuses an open file that is not the one at `path`: its final path, read from the
    /// handle, must be `path` itself. Something may have been swapped in between the look and
    /// the open, and Wine shows a link made on the host as a plain file that leads elsewhere.
    pub(crate) fn refuse_elsewhere(file: &std::fs::File, path: &Path) -> io::Result<()> {
        #[cfg(windows)]
        {
            let opened = final_path(file)?;
            let (opened, path) = (opened.to_string_lossy(), path.to_string_lossy());
            if !(crate::winpath::contains(&path, &opened)
                && crate::winpath::contains(&opened, &path))
            {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "what opened is not the file that was checked (a link, or replaced meanwhile)",
                ));
            }
        }
        #[cfg(not(windows))]
        let _ = (file, path);
        Ok(())
    }

    /// The path an open file is at, as Windows resolves it (`\\?\` form, links followed).
    #[cfg(windows)]
    #[allow(unsafe_code)]
    fn final_path(file: &std::fs::File) -> io::Result<PathBuf> {
        use std::os::windows::ffi::OsStringExt as _;
        use std::os::windows::io::AsRawHandle as _;
        use windows_sys::Win32::Storage::FileSystem::GetFinalPathNameByHandleW;
        let mut buf = vec![0u16; 1024];
        loop {
            let capacity = u32::try_from(buf.len()).unwrap_or(u32::MAX);
            // SAFETY: the handle is the open file's own and outlives the call, which writes at
            // most `capacity` units into `buf`.
            let n = unsafe {
                GetFinalPathNameByHandleW(
                    file.as_raw_handle().cast(),
                    buf.as_mut_ptr(),
                    capacity,
                    0,
                )
            };
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if n == 0 {
                return Err(io::Error::last_os_error());
            }
            if n < buf.len() {
                buf.truncate(n);
                return Ok(PathBuf::from(std::ffi::OsString::from_wide(&buf)));
            }
            if buf.len() >= 1 << 16 {
                return Err(io::Error::other("the file's final path is too long"));
            }
            // Too small: `n` is the size needed, the terminating NUL included.
            buf.resize(n + 1, 0);
        }
    }

    /// Refuses an open file that is one of gantry's own by another name (a hard link made or
    /// swapped in after its path was checked).
    pub(crate) fn refuse_own(file: &std::fs::File) -> io::Result<()> {
        #[cfg(windows)]
        if let Some((id, is_dir, links)) = crate::own_identity::seen_open(file)
            && crate::own_identity::is_own_open(id, is_dir, links)
        {
            return Err(own_by_another_name());
        }
        #[cfg(not(windows))]
        let _ = file;
        Ok(())
    }

    /// Re-resolves the parent and checks it is still where it was: below the root, by the
    /// same directories. Compared in canonical form (`\\?\` and the names' case on disk),
    /// whichever form the root was given in.
    fn recheck(a: &Anchored) -> io::Result<()> {
        let mut expected = std::fs::canonicalize(&a.root)?;
        expected.extend(&a.dirs);
        let mut parent = a.root.clone();
        parent.extend(&a.dirs);
        match std::fs::canonicalize(&parent) {
            Ok(c) if c == expected => Ok(()),
            Ok(_) => Err(moved_under_us()),
            Err(e) => Err(e),
        }
    }

    pub fn open_read(a: &Anchored) -> io::Result<(std::fs::File, u32, u64)> {
        recheck(a)?;
        let meta = std::fs::symlink_metadata(full(a))?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let file = std::fs::File::open(full(a))?;
        refuse_elsewhere(&file, &full(a))?;
        refuse_own(&file)?;
        let size = file.metadata()?.len();
        Ok((file, 0, size))
    }

    pub fn write(a: &Anchored, contents: &[u8], _mode: Option<u32>) -> io::Result<()> {
        write_then(a, contents, |tmp| std::fs::rename(tmp, full(a)))
    }

    pub fn write_new(a: &Anchored, contents: &[u8]) -> io::Result<()> {
        // A hard link is never made over an existing name (NTFS). Once it is made the file
        // is in place, so the temp name's removal (which a scanner holding the file can make
        // fail) is best effort.
        write_then(a, contents, |tmp| match std::fs::hard_link(tmp, full(a)) {
            Ok(()) => {
                let _ = std::fs::remove_file(tmp);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(appeared()),
            Err(e) => Err(e),
        })
    }

    fn write_then(
        a: &Anchored,
        contents: &[u8],
        place: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut dir = a.root.clone();
        dir.extend(&a.dirs);
        std::fs::create_dir_all(&dir)?;
        recheck(a)?;
        let tmp = dir.join(temp_name(&a.name));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let result = f
            .write_all(contents)
            .and_then(|()| f.sync_all())
            .and_then(|()| {
                drop(f);
                recheck(a)?;
                place(&tmp)
            });
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    pub fn remove(a: &Anchored) -> io::Result<()> {
        recheck(a)?;
        let meta = std::fs::symlink_metadata(full(a))?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        std::fs::remove_file(full(a))
    }

    pub fn make_dir(a: &Anchored, parents: bool) -> io::Result<bool> {
        let mut dir = a.root.clone();
        dir.extend(&a.dirs);
        if parents {
            std::fs::create_dir_all(&dir)?;
        }
        recheck(a)?;
        match std::fs::create_dir(full(a)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && parents => {
                if std::fs::symlink_metadata(full(a))?.is_dir() {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    pub fn move_entry(from: &Anchored, to: &Anchored) -> io::Result<()> {
        recheck(from)?;
        let meta = std::fs::symlink_metadata(full(from))?;
        if !(meta.is_file() || meta.file_type().is_symlink()) {
            return Err(io::Error::other("not a file or a symbolic link"));
        }
        let mut dir = to.root.clone();
        dir.extend(&to.dirs);
        std::fs::create_dir_all(&dir)?;
        recheck(to)?;
        if std::fs::symlink_metadata(full(to)).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the destination exists",
            ));
        }
        std::fs::rename(full(from), full(to))
    }

    pub fn remove_link(a: &Anchored) -> io::Result<()> {
        recheck(a)?;
        let meta = std::fs::symlink_metadata(full(a))?;
        if !meta.file_type().is_symlink() {
            return Err(io::Error::other("not a symbolic link"));
        }
        // A link to a directory is removed as one on Windows.
        std::fs::remove_file(full(a)).or_else(|_| std::fs::remove_dir(full(a)))
    }
}

/// A temp name beside the target: hidden, unique, recognisably ours.
fn temp_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    let tag: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".gantry-{tag}.tmp"));
    tmp
}

#[cfg(unix)]
pub(crate) use imp::open_root;
#[cfg(not(unix))]
pub(crate) use imp::refuse_elsewhere;
pub(crate) use imp::refuse_own;
pub use imp::{make_dir, move_entry, open_read, remove, remove_link, write, write_new};

#[cfg(test)]
mod tests {
    use super::*;

    fn anchored(dir: &tempfile::TempDir, rel: &str) -> (PathBuf, Anchored) {
        let root = dir.path().canonicalize().unwrap();
        let path = root.join(rel);
        let a = Anchored::new(&root, &path).unwrap();
        (path, a)
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".gantry-"))
            .collect()
    }

    #[test]
    fn a_new_file_is_written_with_its_parents() {
        let dir = tempfile::tempdir().unwrap();
        let (path, a) = anchored(&dir, "sub/new.txt");
        write_new(&a, b"hello").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        assert!(leftovers(path.parent().unwrap()).is_empty());
    }

    #[test]
    fn a_file_that_appeared_after_the_check_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (path, a) = anchored(&dir, "late.txt");
        // Made between the caller's check (the path was missing) and the write.
        std::fs::write(&path, "someone else's").unwrap();
        let e = write_new(&a, b"mine").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
        assert!(leftovers(path.parent().unwrap()).is_empty());
        // The ordinary write does replace it: the two differ only there.
        write(&a, b"mine", None).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"mine");
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_at_the_path_is_neither_replaced_nor_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, a) = anchored(&dir, "link");
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("made-through-the-link");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(write_new(&a, b"x").is_err());
        assert!(!target.exists());
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
