//! The one place that turns a path a model wrote into facts Cedar can decide on.
//!
//! Every tool that touches the filesystem resolves through [`Roots::resolve`]; no tool checks
//! roots on its own. Resolution: refuse NUL bytes and empty paths; make the path absolute
//! (against `base` or the first root); resolve it the way the OS would (symlinks followed,
//! `..` applied after them) for the part that exists; append the not-yet-existing rest
//! lexically (it has no symlinks to follow). The result says whether it lies inside an approved
//! root and what kind of thing it is; `policies/base/paths.cedar` decides.

use std::path::{Component, Path, PathBuf};

use tool_api::ToolError;

/// What a resolved path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Nothing exists there yet.
    Missing,
    /// A device, FIFO or socket: never read or written.
    Special,
    /// A symbolic link itself, not what it points to: only [`Roots::resolve_entry`] says
    /// so, for removing the link.
    Link,
}

impl Kind {
    /// The value of the Cedar `kind` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Missing => "missing",
            Kind::Special => "special",
            Kind::Link => "link",
        }
    }
}

/// A path after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path exactly as the caller wrote it (what errors show).
    pub given: String,
    /// The canonical absolute path.
    pub path: PathBuf,
    /// Whether it lies inside an approved root.
    pub inside_root: bool,
    /// The approved root it lies under, if any.
    pub root: Option<PathBuf>,
    /// Whether it is, or lies below, one of gantry's own files (config, state, policies).
    pub gantry_owned: bool,
    /// Whether it is a file MCP clients read to decide which servers to start (as resolved
    /// or as written).
    pub client_launch: bool,
    /// Whether it names a directory such a file lives in (`.cursor`, `.vscode`): a link moved
    /// there would make one.
    pub client_launch_dir: bool,
    /// What is there.
    pub kind: Kind,
}

impl Resolved {
    /// The Cedar resource for this path.
    pub fn resource(&self) -> generated::resources::Path {
        generated::resources::Path {
            id: self.path.to_string_lossy().into_owned(),
            inside_root: self.inside_root,
            kind: self.kind.as_str().to_string(),
            gantry_owned: self.gantry_owned,
            client_launch: self.client_launch,
            client_launch_dir: self.client_launch_dir,
        }
    }
}

/// The approved roots in effect: swapped when the config file's `roots` change
/// (the server's live state does), read once at the start of each call.
#[derive(Debug)]
pub struct LiveRoots(std::sync::RwLock<std::sync::Arc<Roots>>);

impl LiveRoots {
    /// Roots in effect from now on.
    pub fn new(roots: Roots) -> LiveRoots {
        LiveRoots(std::sync::RwLock::new(std::sync::Arc::new(roots)))
    }

    /// The roots in effect.
    pub fn get(&self) -> std::sync::Arc<Roots> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Roots in effect from now on, in place of the old ones.
    pub fn set(&self, roots: Roots) {
        match self.0.write() {
            Ok(mut g) => *g = std::sync::Arc::new(roots),
            Err(p) => *p.into_inner() = std::sync::Arc::new(roots),
        }
    }
}

/// Why a directory the user configured cannot be used where it must lie inside the roots.
#[derive(Debug)]
pub enum Placement {
    /// It cannot be resolved (missing, unreadable).
    Unusable(std::io::Error),
    /// It resolves outside every root.
    Outside,
}

/// `dir`, a directory the user named to become a root (the control page), canonical, when
/// it exists and is a directory; the reason otherwise.
pub fn new_root(dir: &Path) -> Result<PathBuf, String> {
    match std::fs::canonicalize(dir) {
        Ok(d) if d.is_dir() => Ok(d),
        Ok(d) => Err(format!("{}: not a directory", d.display())),
        Err(e) => Err(match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{}: no such directory; create it first, or check the spelling",
                dir.display()
            ),
            std::io::ErrorKind::PermissionDenied => format!(
                "{}: gantry's user may not open it (permission denied)",
                dir.display()
            ),
            _ => format!("{}: cannot be opened ({e})", dir.display()),
        }),
    }
}

/// `path` with its links resolved (as given when it cannot be), and the first of `roots`
/// (canonical) that holds it, if any: whether one of gantry's own files lies in a root.
pub fn root_holding<'r>(roots: &'r [PathBuf], path: &Path) -> (PathBuf, Option<&'r PathBuf>) {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let root = roots.iter().find(|r| within(r, &real));
    (real, root)
}

/// A program found on PATH, canonical (links followed): the file that really runs, for the
/// Cedar decision on it. `None` when it vanished meanwhile.
pub fn canonical_program(found: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(found).ok()
}

/// Whether `path` (canonical) is gantry's spill directory `spill_dir` or below it.
pub fn is_below(spill_dir: &Path, path: &Path) -> bool {
    path.is_absolute() && within(spill_dir, path)
}

/// The approved roots, canonicalized once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    roots: Vec<PathBuf>,
    /// gantry's own files and directories, canonical: never reached through a tool.
    owned: Vec<PathBuf>,
    /// Paths below `owned` the tools may still reach.
    owned_except: Vec<PathBuf>,
    /// gantry's own files and every directory above them, each as [`Roots::resolve_entry`]
    /// places a link (its parent canonical, its own name kept): a link there is never
    /// removed, since its removal would change where gantry's files are.
    owned_entries: Vec<PathBuf>,
    /// gantry's own files by device and inode, whatever name reaches them.
    identities: std::sync::Arc<crate::own_identity::OwnIdentities>,
    /// Client launch files the config adds to surface.toml's `client_launch_files`.
    client_launch_extra: Vec<String>,
}

impl Roots {
    /// Canonicalizes each configured root; each must be an existing directory.
    pub fn new(configured: &[PathBuf]) -> Result<Roots, String> {
        let mut roots = Vec::new();
        for r in configured {
            let canonical = std::fs::canonicalize(r)
                .map_err(|e| format!("approved root {}: {e}", r.display()))?;
            if !canonical.is_dir() {
                return Err(format!("approved root {} is not a directory", r.display()));
            }
            if !roots.contains(&canonical) {
                roots.push(canonical);
            }
        }
        if roots.is_empty() {
            return Err("no approved root".into());
        }
        Ok(Roots {
            roots,
            owned: Vec::new(),
            owned_except: Vec::new(),
            owned_entries: Vec::new(),
            identities: std::sync::Arc::default(),
            client_launch_extra: Vec::new(),
        })
    }

    /// Marks gantry's own files (the config file, the state and policy directories) so that
    /// every path at or below them says `gantry_owned`, whatever the roots contain. A path
    /// that does not exist yet is placed the way [`Roots::resolve`] places new paths (its
    /// nearest existing ancestor canonical, the rest appended), so it is caught once created,
    /// even below a symlinked ancestor. `except` are sub-paths the tools may use (the spill
    /// files of command output, which the model is told to read).
    pub fn with_gantry_files(mut self, paths: &[PathBuf], except: &[PathBuf]) -> Roots {
        let place =
            |p: &PathBuf| resolve_os(p).map_or_else(|_| p.clone(), |(canonical, _)| canonical);
        self.owned.extend(paths.iter().map(place));
        self.owned_except.extend(except.iter().map(place));
        self.identities = std::sync::Arc::new(crate::own_identity::OwnIdentities::new(
            self.owned.clone(),
            self.owned_except.clone(),
        ));
        crate::own_identity::put_in_effect(self.identities.clone());
        for p in paths {
            for a in p.ancestors() {
                if let (Some(parent), Some(name)) = (a.parent(), a.file_name()) {
                    self.owned_entries
                        .push(place(&parent.to_path_buf()).join(name));
                }
            }
        }
        self
    }

    /// Adds client launch files (the end of a path, `/`-separated) to surface.toml's.
    pub fn with_client_launch_files(mut self, extra: &[String]) -> Roots {
        self.client_launch_extra.extend(extra.iter().cloned());
        self
    }

    /// Whether `path` ends with one of the client launch files (case-insensitively where
    /// the file system usually is: Windows, macOS).
    pub fn is_client_launch(&self, path: &Path) -> bool {
        self.ends_with_launch(path, false)
    }

    /// Whether `path` ends with a directory a client launch file lives in (`.cursor` of
    /// `.cursor/mcp.json`).
    pub fn is_client_launch_dir(&self, path: &Path) -> bool {
        self.ends_with_launch(path, true)
    }

    fn ends_with_launch(&self, path: &Path, its_directory: bool) -> bool {
        let same = |a: &str, b: &std::ffi::OsStr| {
            // A name that is not UTF-8 is never one of the listed (UTF-8) names.
            let Some(b) = b.to_str() else { return false };
            if cfg!(target_os = "linux") {
                a == b
            } else {
                a.eq_ignore_ascii_case(b)
            }
        };
        // Compared from the end, name by name, without copying: this runs on every path a
        // call resolves.
        generated::CLIENT_LAUNCH_FILES
            .iter()
            .copied()
            .chain(self.client_launch_extra.iter().map(String::as_str))
            .any(|file| {
                let mut wanted = file.split('/').rev();
                if its_directory && (wanted.next().is_none() || !file.contains('/')) {
                    return false;
                }
                let mut names = path.components().rev();
                wanted.all(|w| names.next().is_some_and(|n| same(w, n.as_os_str())))
            })
    }

    /// Whether something made at `missing` (a path that does not exist) would decide where
    /// gantry's files are: it is one of them or a missing directory above them (a link
    /// moved there would send them elsewhere), or it lies below one of them, the used
    /// sub-paths included (a link made at `state/spill` would send spill files elsewhere).
    fn would_place_owned(&self, missing: &Path) -> bool {
        self.owned_entries.iter().any(|e| e == missing)
            || self.owned.iter().any(|o| within(o, missing))
    }

    /// gantry's own files, canonical (what a walk must never enter).
    pub fn gantry_files(&self) -> &[PathBuf] {
        &self.owned
    }

    /// Whether a canonical path is, or lies below, one of gantry's own files; or is one of
    /// them by another name (a hard link, a bind mount: the same device and inode).
    pub fn is_gantry_owned(&self, canonical: &Path) -> bool {
        let by_name = self.owned.iter().any(|o| within(o, canonical))
            && !self.owned_except.iter().any(|e| within(e, canonical));
        by_name || self.identities.holds(canonical)
    }

    /// The first root: where relative paths resolve by default.
    pub fn first(&self) -> &Path {
        &self.roots[0]
    }

    /// The roots, canonical, for the user (start-up log, `gantry check`); tool errors give
    /// only their count.
    pub fn all(&self) -> &[PathBuf] {
        &self.roots
    }

    /// How many roots there are (errors give the count, never the list).
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// Always false: there is at least one root.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The innermost root containing a canonical path.
    pub fn root_of(&self, canonical: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .filter(|r| within(r, canonical))
            .max_by_key(|r| r.components().count())
            .map(PathBuf::as_path)
    }

    /// Whether a canonical path lies inside a root.
    pub fn contains(&self, canonical: &Path) -> bool {
        self.root_of(canonical).is_some()
    }

    /// Whether `path`, an absolute path a transcript or a config wrote (not a tool's), is
    /// inside a root: as written (no `..`), and, when it exists, once its links are resolved
    /// too. A path that no longer exists is judged as written.
    pub fn holds_as_written(&self, path: &Path) -> bool {
        if !path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return false;
        }
        let as_written = self.roots.iter().any(|r| within(r, path));
        match std::fs::canonicalize(path) {
            Ok(canonical) => as_written && self.contains(&canonical),
            Err(_) => as_written,
        }
    }

    /// `dir`, a directory the user configured (a worker kind's `workdir`), canonical, when it
    /// exists and lies inside a root.
    pub fn configured_dir(&self, dir: &Path) -> Result<PathBuf, Placement> {
        let canonical = std::fs::canonicalize(dir).map_err(Placement::Unusable)?;
        if self.contains(&canonical) {
            Ok(canonical)
        } else {
            Err(Placement::Outside)
        }
    }

    /// Resolves `given` like [`Roots::resolve`], except that a last component which is a
    /// symbolic link stays the link ([`Kind::Link`]), beneath its resolved directory: what a
    /// removal of the link touches. Its target is never looked at.
    pub fn resolve_entry(&self, given: &str, base: Option<&Path>) -> Result<Resolved, ToolError> {
        let raw = Path::new(given);
        let absolute = if raw.is_absolute() {
            raw.to_path_buf()
        } else {
            base.unwrap_or(self.first()).join(raw)
        };
        // What `resolve` refuses, it refuses here too, before the filesystem is asked.
        let refused = given.is_empty()
            || given.contains('\0')
            || (cfg!(windows) && crate::winpath::check(given).is_err());
        let is_link = !refused
            && std::fs::symlink_metadata(&absolute).is_ok_and(|m| m.file_type().is_symlink());
        let (Some(parent), Some(name), true) = (absolute.parent(), absolute.file_name(), is_link)
        else {
            return self.resolve(given, base);
        };
        let dir = self.resolve(&parent.to_string_lossy(), None)?;
        let path = if dir.inside_root {
            if dir.kind != Kind::Dir {
                return self.resolve(given, base);
            }
            dir.path.join(name)
        } else {
            // Outside the roots the link is refused as itself, never followed.
            absolute.clone()
        };
        // Whether removing the link would move one of gantry's files: it is one of them or
        // above them as configured, or it points at or above one.
        let followed = self.resolve(given, base).ok();
        let guards_owned = followed
            .as_ref()
            .is_some_and(|f| f.gantry_owned || self.owned.iter().any(|o| within(&f.path, o)));
        Ok(Resolved {
            given: given.to_string(),
            gantry_owned: self.is_gantry_owned(&path)
                || guards_owned
                || self.owned_entries.contains(&path),
            client_launch: dir.inside_root
                && (self.is_client_launch(&path) || self.is_client_launch(&absolute)),
            client_launch_dir: dir.inside_root
                && (self.is_client_launch_dir(&path) || self.is_client_launch_dir(&absolute)),
            path,
            inside_root: dir.inside_root,
            root: dir.root,
            kind: Kind::Link,
        })
    }

    /// Resolves `given` (relative paths against `base`, else the first root).
    pub fn resolve(&self, given: &str, base: Option<&Path>) -> Result<Resolved, ToolError> {
        if given.is_empty() {
            return Err(ToolError::invalid_input("empty path"));
        }
        if given.contains('\0') {
            return Err(ToolError::invalid_input("path contains a NUL byte"));
        }
        if cfg!(windows)
            && let Err(refusal) = crate::winpath::check(given)
        {
            return Err(ToolError::new(
                tool_api::ErrorCode::PathNotAllowed,
                format!("{given}: {refusal}"),
            ));
        }
        let raw = Path::new(given);
        let absolute = if raw.is_absolute() {
            raw.to_path_buf()
        } else {
            base.unwrap_or(self.first()).join(raw)
        };
        let outside = |path: PathBuf| Resolved {
            given: given.to_string(),
            path,
            inside_root: false,
            root: None,
            gantry_owned: false,
            client_launch: false,
            client_launch_dir: false,
            kind: Kind::Missing,
        };
        let resolved = if cfg!(unix) {
            match self.resolve_steps(&absolute) {
                Ok(Step::Outside(at)) => return Ok(outside(at)),
                Ok(Step::Found(path, kind)) => Ok((path, kind)),
                Err(e) => Err(e),
            }
        } else {
            resolve_os(&absolute)
        };
        let (path, kind) = match resolved {
            Ok(found) => found,
            Err(e) => {
                // Whatever went wrong below a point outside every root (`f.txt/x` where f.txt
                // is a file, `dir/../x` where dir is missing) must look exactly like any other
                // outside path, or the error would tell what exists there.
                if let Some(outside) = self.outside_ancestor(&absolute) {
                    return Ok(Resolved {
                        given: given.to_string(),
                        path: outside,
                        inside_root: false,
                        root: None,
                        gantry_owned: false,
                        client_launch: false,
                        client_launch_dir: false,
                        kind: Kind::Missing,
                    });
                }
                return Err(if e.kind() == std::io::ErrorKind::InvalidInput {
                    ToolError::invalid_input(format!("{given}: {UP_THROUGH_MISSING}"))
                } else {
                    ToolError::os(format!("{given}: cannot resolve"), &e)
                });
            }
        };
        let root = self.root_of(&path).map(Path::to_path_buf);
        Ok(Resolved {
            given: given.to_string(),
            // Only inside a root: outside, every path gets the one answer.
            gantry_owned: root.is_some()
                && (self.is_gantry_owned(&path)
                    || (kind == Kind::Missing && self.would_place_owned(&path))),
            // As resolved, and as written: a link on the way (`.vscode` pointing elsewhere)
            // still makes the file the client reads.
            client_launch: root.is_some()
                && (self.is_client_launch(&path) || self.is_client_launch(&absolute)),
            client_launch_dir: root.is_some()
                && (self.is_client_launch_dir(&path) || self.is_client_launch_dir(&absolute)),
            inside_root: root.is_some(),
            // Outside the roots nothing is described: a file, a directory, a device and
            // nothing at all are denied alike.
            kind: if root.is_some() { kind } else { Kind::Missing },
            root,
            path,
        })
    }

    /// Whether canonical `path` is inside a root or on the way to one (an ancestor of a root):
    /// the only places resolution may pass through.
    fn on_the_way(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|r| within(r, path) || within(path, r))
    }

    /// Resolves `absolute` the way the OS does, one component at a time: a symlink is replaced
    /// by its target, `..` goes up from what the path resolved to so far. As soon as that is
    /// neither inside a root nor an ancestor of one, resolution stops with
    /// [`Step::Outside`]: nothing after it is looked at, so the answer cannot depend on
    /// what exists out there (`../../home/u/.aws/../../../root/f` is outside whether or not
    /// `.aws` exists, and a link to an outside target is outside whether or not the target
    /// exists).
    fn resolve_steps(&self, absolute: &Path) -> std::io::Result<Step> {
        enum Part {
            Root,
            Up,
            Name(std::ffi::OsString),
        }
        fn parts(path: &Path) -> impl DoubleEndedIterator<Item = Part> + '_ {
            path.components().filter_map(|c| match c {
                Component::RootDir | Component::Prefix(_) => Some(Part::Root),
                Component::CurDir => None,
                Component::ParentDir => Some(Part::Up),
                Component::Normal(n) => Some(Part::Name(n.to_os_string())),
            })
        }
        let mut pending: std::collections::VecDeque<Part> = parts(absolute).collect();
        let mut at = PathBuf::from("/");
        let mut links = 0;
        let mut missing = false;
        // What the last component looked up is, so the end needs no second look.
        let mut last: Option<std::fs::FileType> = None;
        while let Some(part) = pending.pop_front() {
            match part {
                Part::Root => {
                    at = PathBuf::from("/");
                    last = None;
                }
                Part::Up if missing => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        UP_THROUGH_MISSING,
                    ));
                }
                Part::Up => {
                    at.pop();
                    last = None;
                }
                // Below something missing nothing exists, so nothing can be a link.
                Part::Name(name) if missing => at.push(name),
                Part::Name(name) => {
                    let next = at.join(&name);
                    // A root, or an ancestor of one, that lies in no other root was a
                    // directory when the roots were canonicalized and is where no tool
                    // writes; looking again per call would cost a syscall a component and
                    // prove nothing an open could rely on: every open walks from `/` to the
                    // root with O_NOFOLLOW (`beneath::open_root`), so a root, or an ancestor
                    // of one, swapped for a link fails there.
                    if self.at_or_above_the_roots(&next) {
                        at = next;
                        last = None;
                        continue;
                    }
                    last = None;
                    match std::fs::symlink_metadata(&next) {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            links += 1;
                            if links > 40 {
                                return Err(std::io::Error::other(
                                    "too many levels of symbolic links",
                                ));
                            }
                            let target = std::fs::read_link(&next)?;
                            for p in parts(&target).rev() {
                                pending.push_front(p);
                            }
                            continue;
                        }
                        Ok(meta) => {
                            last = Some(meta.file_type());
                            at = next;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            at = next;
                            missing = true;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            if !self.on_the_way(&at) {
                return Ok(Step::Outside(at));
            }
        }
        if missing {
            return Ok(Step::Found(at, Kind::Missing));
        }
        let kind = match last {
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_file() => Kind::File,
            Some(_) => Kind::Special,
            // A root that was removed since the roots were read.
            None => match kind_of(&at) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kind::Missing,
                other => other?,
            },
        };
        Ok(Step::Found(at, kind))
    }

    /// Whether `path` is a root or an ancestor of one, and strictly inside no root.
    fn at_or_above_the_roots(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| within(path, r))
            && !self.roots.iter().any(|r| r != path && within(r, path))
    }

    /// The deepest ancestor of `absolute` that resolves, when it lies outside every root; or
    /// `absolute` itself, when nothing on its way resolves and it names no root.
    fn outside_ancestor(&self, absolute: &Path) -> Option<PathBuf> {
        match absolute
            .ancestors()
            .skip(1)
            .find_map(|a| std::fs::canonicalize(a).ok())
        {
            Some(found) => (!self.contains(&found)).then_some(found),
            // Nothing on the way resolves (a share that cannot be reached, a drive that is
            // not there): outside every root unless it names one, and refused as any other
            // outside path, or the error would tell which of them exist.
            None => (!self.contains(absolute)).then(|| absolute.to_path_buf()),
        }
    }
}

/// Whether canonical `path` is `root` or below it (without regard to case on Windows).
fn within(root: &Path, path: &Path) -> bool {
    if cfg!(windows) {
        crate::winpath::contains(&root.to_string_lossy(), &path.to_string_lossy())
    } else {
        path.starts_with(root)
    }
}

/// Where [`Roots::resolve_steps`] got to.
enum Step {
    /// The path, canonical, and what is there.
    Found(PathBuf, Kind),
    /// Resolution left every root (and every way to one) here.
    Outside(PathBuf),
}

const UP_THROUGH_MISSING: &str = "`..` after a directory that does not exist";

/// Resolves the existing prefix with the OS (symlinks, then `..`) and appends the rest.
fn resolve_os(absolute: &Path) -> std::io::Result<(PathBuf, Kind)> {
    match std::fs::canonicalize(absolute) {
        Ok(canonical) => {
            let kind = kind_of(&canonical)?;
            Ok((canonical, kind))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Walk up to the nearest ancestor that exists; everything below it is new, so it
            // holds no symlink and can be applied lexically.
            let mut rest: Vec<Component<'_>> = Vec::new();
            let mut ancestor = absolute;
            loop {
                let Some(parent) = ancestor.parent() else {
                    return Err(e);
                };
                if let Some(last) = ancestor.components().next_back() {
                    rest.push(last);
                }
                ancestor = parent;
                match std::fs::canonicalize(ancestor) {
                    Ok(mut base) => {
                        // `..` below a directory that does not exist cannot be resolved the way
                        // the OS would (it would fail); applied lexically it could name an
                        // existing file while claiming it is new. Refuse it.
                        if rest.iter().any(|c| matches!(c, Component::ParentDir)) {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::InvalidInput,
                                UP_THROUGH_MISSING,
                            ));
                        }
                        for c in rest.iter().rev() {
                            if let Component::Normal(name) = c {
                                base.push(name);
                            }
                        }
                        // Something may have appeared meanwhile: say what is there now.
                        let kind = match std::fs::symlink_metadata(&base) {
                            Ok(_) => kind_of(&base).unwrap_or(Kind::Special),
                            Err(_) => Kind::Missing,
                        };
                        return Ok((base, kind));
                    }
                    Err(e2) if e2.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e2) => return Err(e2),
                }
            }
        }
        Err(e) => Err(e),
    }
}

fn kind_of(path: &Path) -> std::io::Result<Kind> {
    let meta = std::fs::metadata(path)?;
    Ok(if meta.is_dir() {
        Kind::Dir
    } else if meta.is_file() {
        Kind::File
    } else {
        Kind::Special
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Roots) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        let roots = Roots::new(&[root]).unwrap();
        (dir, roots)
    }

    /// gantry's own files are placed by their real path even when they do not exist yet and
    /// an ancestor is a symlink, and the usable exceptions below them stay usable.
    #[cfg(unix)]
    #[test]
    fn gantry_files_are_recognised_through_symlinks_before_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), dir.path().join("link")).unwrap();
        let roots = Roots::new(std::slice::from_ref(&root))
            .unwrap()
            .with_gantry_files(
                &[
                    dir.path().join("link/missing/gantry/config.toml"),
                    root.join("state"),
                ],
                &[root.join("state/spill")],
            );
        let r = roots
            .resolve("real/missing/gantry/config.toml", None)
            .unwrap();
        assert!(r.gantry_owned, "{r:?}");
        assert!(
            roots
                .resolve("state/tokens.toml", None)
                .unwrap()
                .gantry_owned
        );
        // Below the used sub-path, what exists is the tools' to use; nothing new is made
        // there (a link made at `spill` would send gantry's spill files elsewhere).
        assert!(
            roots
                .resolve("state/spill/out-1.txt", None)
                .unwrap()
                .gantry_owned
        );
        std::fs::create_dir_all(root.join("state/spill")).unwrap();
        std::fs::write(root.join("state/spill/out-1.txt"), "x").unwrap();
        assert!(
            !roots
                .resolve("state/spill/out-1.txt", None)
                .unwrap()
                .gantry_owned
        );
        assert!(!roots.resolve("real/other.txt", None).unwrap().gantry_owned);
    }

    /// What `..` leads to is looked at again, not taken from the component before it.
    #[cfg(unix)]
    #[test]
    fn the_kind_after_dot_dot_is_the_parents() {
        let (_d, roots) = setup();
        let r = roots.resolve("sub/a.txt/..", None).unwrap();
        assert_eq!((r.kind, r.path), (Kind::Dir, roots.first().join("sub")));
    }

    #[test]
    fn relative_paths_resolve_against_the_first_root() {
        let (_d, roots) = setup();
        let r = roots.resolve("sub/a.txt", None).unwrap();
        assert!(r.inside_root);
        assert_eq!(r.kind, Kind::File);
        assert_eq!(r.path, roots.first().join("sub/a.txt"));
    }

    #[test]
    fn dot_dot_escapes_are_outside() {
        let (_d, roots) = setup();
        let r = roots.resolve("../secret.txt", None).unwrap();
        assert!(!r.inside_root);
        let r = roots.resolve("sub/../../secret.txt", None).unwrap();
        assert!(!r.inside_root);
    }

    #[test]
    fn new_paths_are_checked_through_their_nearest_existing_ancestor() {
        let (_d, roots) = setup();
        let r = roots.resolve("sub/new/deeper.txt", None).unwrap();
        assert!(r.inside_root);
        assert_eq!(r.kind, Kind::Missing);
        if cfg!(windows) {
            // Windows applies `..` lexically before the file system sees the path, so the
            // name is the existing file, and it is described as one.
            let r = roots.resolve("sub/new/../a.txt", None).unwrap();
            assert_eq!((r.kind, r.inside_root), (Kind::File, true));
            let r = roots.resolve("sub/new/../../../escape.txt", None).unwrap();
            assert!(!r.inside_root);
        } else {
            // `..` below a missing directory could name an existing file as if it were new.
            let e = roots
                .resolve("sub/new/../a.txt", None)
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                e.as_deref(),
                Some("INVALID_INPUT: sub/new/../a.txt: `..` after a directory that does not exist")
            );
            assert!(roots.resolve("sub/new/../../../escape.txt", None).is_err());
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_before_the_root_check() {
        let (d, roots) = setup();
        let link = roots.first().join("link");
        std::os::unix::fs::symlink(d.path().join("secret.txt"), &link).unwrap();
        let r = roots.resolve("link", None).unwrap();
        assert!(!r.inside_root);
        let dirlink = roots.first().join("dirlink");
        std::os::unix::fs::symlink(d.path(), &dirlink).unwrap();
        let r = roots.resolve("dirlink/new-file.txt", None).unwrap();
        assert!(!r.inside_root, "{r:?}");
    }

    #[test]
    fn nul_and_empty_are_invalid_input() {
        let (_d, roots) = setup();
        assert_eq!(
            roots.resolve("a\0b", None).err().map(|e| e.code),
            Some(tool_api::ErrorCode::InvalidInput)
        );
        assert_eq!(
            roots.resolve("", None).err().map(|e| e.code),
            Some(tool_api::ErrorCode::InvalidInput)
        );
    }

    #[cfg(unix)]
    #[test]
    fn fifos_inside_a_root_are_special() {
        let (_d, roots) = setup();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            roots.first().join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
        let r = roots.resolve("pipe", None).unwrap();
        assert_eq!((r.kind, r.inside_root), (Kind::Special, true));
    }

    /// Going out and back in through `..` is outside whatever exists on the way, and a link
    /// to an outside target is outside whether or not the target exists: otherwise the answer
    /// tells what exists out there.
    #[cfg(unix)]
    #[test]
    fn out_and_back_and_dangling_links_are_outside_whatever_exists() {
        let (d, roots) = setup();
        std::fs::create_dir(d.path().join("exists")).unwrap();
        for given in [
            "../exists/../root/sub/a.txt",
            "../missing/../root/sub/a.txt",
        ] {
            let r = roots.resolve(given, None).unwrap();
            assert_eq!((r.inside_root, r.kind), (false, Kind::Missing), "{given}");
        }
        std::os::unix::fs::symlink(d.path().join("exists/x"), roots.first().join("dl1")).unwrap();
        std::fs::write(d.path().join("exists/x"), "x").unwrap();
        std::os::unix::fs::symlink(d.path().join("nothing/x"), roots.first().join("dl2")).unwrap();
        for given in ["dl1", "dl2", "dl1/y", "dl2/y"] {
            let r = roots.resolve(given, None).unwrap();
            assert_eq!((r.inside_root, r.kind), (false, Kind::Missing), "{given}");
        }
        // Inside, `..` and links that stay inside resolve as the OS would.
        std::os::unix::fs::symlink("sub", roots.first().join("rel")).unwrap();
        let r = roots.resolve("rel/../sub/./a.txt", None).unwrap();
        assert_eq!((r.inside_root, r.kind), (true, Kind::File));
        assert_eq!(r.path, roots.first().join("sub/a.txt"));
        let r = roots.resolve("rel/a.txt", None).unwrap();
        assert_eq!(r.path, roots.first().join("sub/a.txt"));
        let r = roots
            .resolve(
                &roots.first().join("../root/sub").display().to_string(),
                None,
            )
            .unwrap();
        assert_eq!((r.inside_root, r.kind), (true, Kind::Dir));
    }

    /// Outside the roots every path gets the same answer, whether it names a file, a
    /// directory, a device, nothing, or goes through a file or a missing directory.
    #[test]
    fn outside_paths_reveal_nothing_about_what_is_there() {
        let (d, roots) = setup();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let mut outside = vec![
            "../secret.txt",
            "../nothing.txt",
            "../dir",
            "../secret.txt/x",
            "../nothing.txt/x",
            "../dir/../x",
            "../missing/../x",
            "../secret.txt/../x",
        ];
        if cfg!(unix) {
            outside.push("/dev/null");
        }
        for given in outside {
            let r = roots.resolve(given, None);
            let facts = r.as_ref().map(|r| (r.inside_root, r.kind, r.gantry_owned));
            assert_eq!(
                facts.map_err(ToString::to_string),
                Ok((false, Kind::Missing, false)),
                "{given}"
            );
        }
    }
}
