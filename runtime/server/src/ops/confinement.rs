//! Commands confined to the approved roots (`[exec] confine = "roots"`): on Linux each command
//! starts through `gantry sandbox-exec`, which restricts itself with Landlock and then becomes
//! the shell. Reading and running programs stay as they were; writing, creating, removing,
//! renaming and truncating files work only below the roots, a private temp directory (which
//! `TMPDIR` names) and the few devices programs write to. Other platforms refuse the setting.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Devices a program may open for writing under confinement.
/// (The command's own terminal is added by name: other ptys, such as another session's,
/// stay read-only.)
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/shm",
    "/dev/random",
    "/dev/urandom",
];

/// Whether commands can be confined here; the reason when not.
pub fn probe() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        use landlock::{ABI, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};
        // All of V3's write rights (truncate included) or nothing: a partial ruleset would
        // leave, e.g., truncating gantry's audit log possible.
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V3))
            .and_then(|r| r.create())
            .map(drop)
            .map_err(|e| {
                format!("this kernel cannot confine commands with Landlock ({e}); set [exec] confine = \"off\" or use a kernel with Landlock ABI 3 (Linux 6.2+) enabled")
            })
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(format!(
            "[exec] confine = \"roots\" is implemented on Linux only (Landlock); this is {}: set confine = \"off\"",
            std::env::consts::OS
        ))
    }
}

/// Confinement holds only if nothing a confined command can write is something gantry runs
/// or trusts unconfined: its binary (the launcher itself), its config, policies and state,
/// and the login profile under HOME, which gantry runs to take the snapshot. Each of those
/// lying below a root is a refusal, named.
pub fn check_layout(roots: &[PathBuf], own: &[(&str, Option<PathBuf>)]) -> Result<(), String> {
    let inside: Vec<String> = own
        .iter()
        .filter_map(|(what, path)| {
            let path = path.as_ref()?;
            let (real, root) = confine::path_policy::root_holding(roots, path);
            root.map(|r| {
                format!(
                    "{what} ({}) lies below the root {}",
                    real.display(),
                    r.display()
                )
            })
        })
        .collect();
    if inside.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "[exec] confine = \"roots\" cannot hold: a confined command could change what gantry runs or trusts unconfined: {}; move it out of the roots or set confine = \"off\"",
            inside.join("; ")
        ))
    }
}

/// The program and arguments that start a command confined to `roots` (and `tmp`), to be
/// followed by the shell and its arguments.
pub fn launcher(exe: &Path, roots: &[PathBuf], tmp: &Path) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![exe.into(), "sandbox-exec".into()];
    out.push("--tmp".into());
    out.push(tmp.into());
    for r in roots {
        out.push("--write".into());
        out.push(r.into());
    }
    out.push("--".into());
    out
}

/// Restricts this process (Landlock) and becomes `command`; returns only on failure, with
/// what went wrong. Nothing runs unconfined: a ruleset the kernel does not enforce is an
/// error, not a warning.
pub fn exec_confined(write: &[PathBuf], tmp: &Path, command: &[OsString]) -> String {
    let Some((program, args)) = command.split_first() else {
        return "sandbox-exec: no command given".into();
    };
    #[cfg(target_os = "linux")]
    {
        use landlock::{
            ABI, AccessFs, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
            RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
        };
        // The roots and the temp directory are opened from `/` without following a link:
        // Landlock grants what a descriptor is, and a root (or a directory above it) swapped
        // for a link by an earlier command must not turn into a grant of where it points.
        let mut dirs = Vec::new();
        for dir in write.iter().chain([&tmp.to_path_buf()]) {
            match confine::open_dir_nofollow(dir) {
                Ok(fd) => dirs.push(fd),
                Err(e) => {
                    return format!(
                        "sandbox-exec: {} is not where the roots were read ({e}); the command was not run",
                        dir.display()
                    );
                }
            }
        }
        let mut writable: Vec<PathBuf> = Vec::new();
        writable.extend(
            WRITABLE_DEVICES
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists()),
        );
        if let Some(own_tty) = terminal::procfs::own_fd_target(0)
            && own_tty.starts_with("/dev/pts/")
        {
            writable.push(own_tty);
        }
        let access = AccessFs::from_write(ABI::V3);
        let restricted = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(access)
            .and_then(|r| r.create())
            .and_then(|r| {
                r.add_rules(
                    dirs.into_iter()
                        .map(|fd| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, access))),
                )
            })
            .and_then(|r| r.add_rules(path_beneath_rules(&writable, access)))
            .and_then(|r| r.restrict_self());
        match restricted {
            Ok(s) if s.ruleset == RulesetStatus::FullyEnforced => {}
            Ok(_) => return "sandbox-exec: the kernel did not fully enforce the Landlock ruleset; the command was not run".into(),
            Err(e) => return format!("sandbox-exec: cannot confine the command: {e}"),
        }
        use std::os::unix::process::CommandExt as _;
        let e = std::process::Command::new(program)
            .args(args)
            .env("TMPDIR", tmp)
            .env("GANTRY_CONFINED_TMPDIR", tmp)
            .exec();
        format!(
            "sandbox-exec: cannot start {}: {e}",
            Path::new(program).display()
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (write, tmp, program, args, WRITABLE_DEVICES);
        "sandbox-exec: confinement is implemented on Linux only".into()
    }
}
