//! The `ssh` command lines gantry runs, and what ssh's own words on a failure mean.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use config::machines::MachineConfig;

/// gantry's own known-hosts file in the state directory: the only one its ssh trusts, written
/// only by `gantry hosts add`.
pub fn known_hosts(state_dir: &Path) -> PathBuf {
    state_dir.join("known_hosts")
}

/// Where the shared connections' sockets live (private, in the state directory).
fn control_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("ssh")
}

/// Whether an ssh command may start a shared connection others then use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Start one if none is up, and keep it a minute after the last use (the server).
    Start,
    /// Use one that is up, else connect alone (a one-off command: it leaves nothing behind).
    Join,
}

/// One machine under `[hosts]`.
#[derive(Debug, Clone, Copy)]
pub struct Machine<'a> {
    /// Its name in the config.
    pub name: &'a str,
    /// Its entry.
    pub config: &'a MachineConfig,
    /// gantry's state directory (known hosts, shared connections).
    pub state_dir: &'a Path,
}

/// How long ssh waits for the TCP connection and the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Machine<'_> {
    /// A short name of this entry as a whole (its name, destination, port, key and command),
    /// for its shared connection and its ssh log: two entries for the same `user@host` with
    /// different keys never share a connection (a key may carry limits of its own there).
    fn id(&self) -> String {
        let c = self.config;
        let whole = format!(
            "{}\0{}\0{:?}\0{:?}\0{}",
            self.name,
            c.ssh,
            c.port,
            c.identity_file,
            c.gantry()
        );
        crate::digest::sha256_hex(whole.as_bytes())[..16].to_string()
    }

    /// Where ssh writes its own messages (`-E`), apart from what the remote command says:
    /// only these say whether a key, the network or the login failed.
    pub fn ssh_log(&self) -> PathBuf {
        control_dir(self.state_dir).join(format!("{}.log", self.id()))
    }

    /// Empties the ssh log, so what it holds next is about the next connection only.
    pub fn fresh_log(&self) {
        let _ = std::fs::File::create(self.ssh_log());
    }

    /// `ssh`'s options for this machine, up to and including the destination: no prompt of
    /// any kind (a model's call must never wait on a password or a new key), host keys only
    /// from gantry's file and checked strictly, keep-alives so a dead link fails in seconds.
    pub fn ssh_args(&self, sharing: Sharing) -> Vec<OsString> {
        let known = known_hosts(self.state_dir);
        let control = control_dir(self.state_dir).join(self.id());
        let mut out: Vec<OsString> = vec!["-T".into(), "-E".into(), self.ssh_log().into()];
        let mut option = |o: String| {
            out.push("-o".into());
            out.push(o.into());
        };
        option("BatchMode=yes".into());
        option("StrictHostKeyChecking=yes".into());
        option(format!("UserKnownHostsFile={}", known.display()));
        option("GlobalKnownHostsFile=/dev/null".into());
        option("UpdateHostKeys=no".into());
        option("CheckHostIP=no".into());
        option("PasswordAuthentication=no".into());
        option("KbdInteractiveAuthentication=no".into());
        option("ForwardAgent=no".into());
        option("ForwardX11=no".into());
        option("ClearAllForwardings=yes".into());
        option("PermitLocalCommand=no".into());
        option(format!("ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()));
        option("ServerAliveInterval=5".into());
        option("ServerAliveCountMax=3".into());
        option("LogLevel=ERROR".into());
        option(format!("ControlPath={}", control.display()));
        match sharing {
            Sharing::Start => {
                option("ControlMaster=auto".into());
                option("ControlPersist=60".into());
            }
            Sharing::Join => option("ControlMaster=no".into()),
        }
        if let Some(port) = self.config.port {
            out.push("-p".into());
            out.push(port.to_string().into());
        }
        if let Some(identity) = &self.config.identity_file {
            out.push("-i".into());
            out.push(identity.into());
            out.push("-o".into());
            out.push("IdentitiesOnly=yes".into());
        }
        // Nothing after `--` is read as an option, whatever the config says.
        out.push("--".into());
        out.push(self.config.ssh.clone().into());
        out
    }

    /// The arguments of `ssh` that start `gantry serve --stdio` (Core) on the machine, for
    /// the server: it keeps a shared connection up.
    pub fn serve_args(&self) -> Vec<OsString> {
        self.serve_args_with(Sharing::Start)
    }

    /// [`Machine::serve_args`], sharing as `sharing` says.
    pub fn serve_args_with(&self, sharing: Sharing) -> Vec<OsString> {
        let mut args = self.ssh_args(sharing);
        args.push(format!("{} serve --stdio --connector core", self.config.gantry()).into());
        args
    }

    /// The MCP server the upstream client starts for this machine: `ssh` with
    /// [`Machine::serve_args_with`].
    pub fn serve_command(&self, sharing: Sharing) -> config::upstream::UpstreamConfig {
        config::upstream::UpstreamConfig {
            command: Some("ssh".into()),
            args: self
                .serve_args_with(sharing)
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            env: Default::default(),
            cwd: None,
            url: None,
            bearer_token_env: None,
            timeout: None,
        }
    }

    /// Makes the private directory the shared connections' sockets live in.
    pub fn prepare(&self) -> std::io::Result<()> {
        state_dir::ensure(self.state_dir)?;
        state_dir::ensure(&control_dir(self.state_dir))
    }

    /// Runs `command` there (a one-off: it joins a shared connection if one is up), with
    /// `input` on its stdin; bounded by `timeout`. Returns its exit status and output.
    pub fn run(
        &self,
        command: &str,
        input: Option<&[u8]>,
        timeout: Duration,
    ) -> std::io::Result<std::process::Output> {
        use std::io::Write as _;
        self.prepare()?;
        self.fresh_log();
        let mut child = std::process::Command::new("ssh")
            .args(self.ssh_args(Sharing::Join))
            .arg(command)
            .stdin(if input.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let feeder = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || {
                    let _ = stdin.write_all(&bytes);
                }))
            }
            _ => None,
        };
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut out);
                }
                out
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("ssh did not finish within {} s", timeout.as_secs()),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(f) = feeder {
            let _ = f.join();
        }
        Ok(std::process::Output {
            status,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        })
    }
}

/// What went wrong reaching a machine, as ssh said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No key of the machine is pinned.
    KeyNotPinned,
    /// The machine showed a key other than the pinned one.
    KeyChanged,
    /// Nothing answered at its address, or it could not be resolved.
    Unreachable,
    /// It answered but refused the login.
    LoginRefused,
    /// Logged in, but the gantry command is not there.
    NoGantry,
    /// Something else; what ssh or the remote said last.
    Other(String),
}

/// A line as plain text: terminal escape sequences and control characters dropped, trimmed,
/// at most 300 characters.
fn plain_text(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then one final letter.
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else if !c.is_control() {
            out.push(c);
        }
    }
    out.trim().chars().take(300).collect()
}

/// What went wrong reaching machine `name`, from what ssh itself logged (`ssh_said`, its
/// `-E` file) and what the remote side wrote to stderr (`remote_said`: the shell and gantry
/// there, and anything a command there writes to them), and the sentence that tells the user
/// what to do. Only ssh's own words can say a key, the network or the login failed.
pub fn explain(name: &str, ssh_said: &str, remote_said: &str) -> (Failure, String) {
    let lower = ssh_said.to_ascii_lowercase();
    let has = |s: &str| lower.contains(s);
    let remote = remote_said.to_ascii_lowercase();
    let failure = if has("remote host identification has changed")
        || has("host key for") && has("has changed")
    {
        Failure::KeyChanged
    } else if has("host key verification failed") || has("no ") && has("host key is known") {
        Failure::KeyNotPinned
    } else if has("connection refused")
        || has("connection timed out")
        || has("no route to host")
        || has("could not resolve hostname")
        || has("network is unreachable")
        || has("operation timed out")
        || has("connection closed by")
        || has("connection reset")
    {
        Failure::Unreachable
    } else if has("permission denied") || has("too many authentication failures") {
        Failure::LoginRefused
    } else if remote.contains("command not found")
        || remote.contains("not found") && remote.contains("gantry")
    {
        Failure::NoGantry
    } else {
        let last = |text: &str| text.lines().map(plain_text).rfind(|l| !l.is_empty());
        Failure::Other(
            last(ssh_said)
                .map(|l| format!("ssh said: {l}"))
                .or_else(|| last(remote_said).map(|l| format!("it said: {l}")))
                .unwrap_or_else(|| "neither ssh nor the machine said why".into()),
        )
    };
    let sentence = match &failure {
        Failure::KeyChanged => format!(
            "host `{name}`: its SSH host key is not the one gantry pinned, so no call goes there; if the machine was really re-installed or re-keyed, the user checks the new key and runs `gantry hosts add {name}`"
        ),
        Failure::KeyNotPinned => format!(
            "host `{name}`: no SSH host key of it is pinned yet; the user runs `gantry hosts add {name}` and confirms its key"
        ),
        Failure::Unreachable => format!(
            "host `{name}`: nothing answers SSH at its address (down, asleep or off the network); try again later or ask the user"
        ),
        Failure::LoginRefused => format!(
            "host `{name}`: it refused the SSH login; the user checks `ssh` and `identity_file` under [hosts.{name}]"
        ),
        Failure::NoGantry => format!(
            "host `{name}`: gantry is not installed there (or not on its PATH); the user runs `gantry hosts install {name}` or sets `gantry` under [hosts.{name}]"
        ),
        Failure::Other(why) => format!("host `{name}`: its gantry did not answer ({why})"),
    };
    (failure, sentence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_words_become_what_the_user_does() {
        let changed = "@@@@@\n@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @\nHost key verification failed.\n";
        let (f, s) = explain("b", changed, "");
        assert_eq!(f, Failure::KeyChanged);
        assert!(s.contains("gantry hosts add b"), "{s}");
        let unknown = "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\nHost key verification failed.\n";
        let (f, s) = explain("b", unknown, "");
        assert_eq!(f, Failure::KeyNotPinned);
        assert!(s.contains("gantry hosts add b"), "{s}");
        let refused = "ssh: connect to host 127.0.0.1 port 1: Connection refused\n";
        assert_eq!(explain("b", refused, "").0, Failure::Unreachable);
        let denied = "root@127.0.0.1: Permission denied (publickey).\n";
        assert_eq!(explain("b", denied, "").0, Failure::LoginRefused);
        let (f, s) = explain("b", "", "bash: line 1: gantry: command not found\n");
        assert_eq!(f, Failure::NoGantry);
        assert!(s.contains("gantry hosts install b"), "{s}");
        let (f, s) = explain("b", "", "roots: no root was given\n\u{1b}[0m");
        assert!(matches!(f, Failure::Other(_)), "{f:?}");
        assert!(s.contains("it said: roots: no root was given"), "{s}");
        // What the remote side writes cannot pass for ssh's own verdict.
        let (f, _) = explain("b", "", changed);
        assert!(matches!(f, Failure::Other(_)), "{f:?}");
    }

    #[test]
    fn the_destination_is_never_an_option() {
        let config = MachineConfig {
            ssh: "me@box".into(),
            port: Some(2222),
            identity_file: Some("/k".into()),
            gantry: Some("/opt/gantry".into()),
        };
        let dir = Path::new("/state");
        let m = Machine {
            name: "box",
            config: &config,
            state_dir: dir,
        };
        let args: Vec<String> = m
            .serve_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let dash = args.iter().position(|a| a == "--").unwrap();
        let log = &args[args.iter().position(|a| a == "-E").unwrap() + 1];
        assert!(
            log.starts_with("/state/ssh/") && log.ends_with(".log"),
            "{log}"
        );
        // Another key for the same user@host: another shared connection.
        let other = MachineConfig {
            identity_file: Some("/k2".into()),
            ..config.clone()
        };
        let o = Machine {
            name: "box",
            config: &other,
            state_dir: dir,
        };
        assert_ne!(m.id(), o.id());
        assert_eq!(args[dash + 1], "me@box");
        assert_eq!(args[dash + 2], "/opt/gantry serve --stdio --connector core");
        assert!(args.contains(&"StrictHostKeyChecking=yes".to_string()));
        assert!(args.contains(&"UserKnownHostsFile=/state/known_hosts".to_string()));
        assert!(args.contains(&"BatchMode=yes".to_string()));
        assert!(args.contains(&"ForwardAgent=no".to_string()));
        assert!(args.contains(&"ForwardX11=no".to_string()));
        assert!(args.contains(&"ControlMaster=auto".to_string()));
        assert!(args.contains(&"ServerAliveInterval=5".to_string()));
    }
}
