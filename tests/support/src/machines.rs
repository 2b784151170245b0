//! Other machines for the Hosts tests and benches: real `sshd` instances on loopback ports,
//! each with its own host key, config, state and root, reached with a user key of their own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A real sshd standing in for another machine.
pub struct Remote {
    dir: tempfile::TempDir,
    /// Its sshd's port on 127.0.0.1.
    pub port: u16,
    sshd: Option<std::process::Child>,
}

/// The user key the hub logs in with, and the public half each machine accepts.
pub struct UserKey {
    dir: tempfile::TempDir,
}

impl Default for UserKey {
    fn default() -> Self {
        Self::new()
    }
}

impl UserKey {
    pub fn new() -> UserKey {
        let dir = tempfile::tempdir().unwrap();
        keygen(&dir.path().join("id"));
        UserKey { dir }
    }

    pub fn private(&self) -> PathBuf {
        self.dir.path().join("id")
    }

    pub fn public(&self) -> PathBuf {
        self.dir.path().join("id.pub")
    }
}

pub fn keygen(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen failed");
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn user() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether this machine can run the tests at all (sshd installed); says why not.
pub fn sshd_here() -> bool {
    if !Path::new("/usr/sbin/sshd").exists() {
        crate::cannot_check("no /usr/sbin/sshd (openssh-server): tests/run installs it");
        return false;
    }
    true
}

impl Remote {
    /// A machine whose gantry config is `config`, accepting `key`.
    pub fn start(key: &UserKey, config: &str) -> Remote {
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "root", "state"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        keygen(&dir.path().join("host_key"));
        std::fs::copy(key.public(), dir.path().join("authorized_keys")).unwrap();
        let mut remote = Remote {
            dir,
            port: free_port(),
            sshd: None,
        };
        remote.run_sshd();
        remote
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn run_sshd(&mut self) {
        // Root's sshd wants its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nPidFile {dir}/sshd.pid\n",
            port = self.port,
            dir = self.dir.path().display()
        );
        std::fs::write(self.path("sshd_config"), config).unwrap();
        let child = std::process::Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(self.path("sshd_config"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(self.path("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        self.sshd = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sshd did not listen: {}",
                std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops sshd: the listener and every session it serves.
    pub fn stop_sshd(&mut self) {
        if let Some(mut child) = self.sshd.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.kill_sessions();
    }

    /// Ends this machine's sshd sessions (forked by the listener: their command line names
    /// no file of ours, their parent is the listener, gone already).
    pub fn kill_sessions(&self) {
        for pid in self.processes() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// A new host key, as a re-installed machine would show.
    pub fn rekey(&mut self) {
        self.stop_sshd();
        keygen(&self.path("host_key"));
        self.run_sshd();
    }

    /// The `[hosts.NAME]` entry that reaches this machine: its gantry with its own config,
    /// state and root, and its own HOME when `own_home` (a bench keeps the real one, as
    /// users have it).
    pub fn entry(&self, name: &str, key: &UserKey, own_home: bool) -> String {
        let dir = self.dir.path().display();
        let home = if own_home {
            format!("HOME={dir}/home ")
        } else {
            String::new()
        };
        format!(
            "[hosts.{name}]\nssh = \"{user}@127.0.0.1\"\nport = {port}\nidentity_file = \"{key}\"\ngantry = \"env {home}GANTRY_LOG=warn GANTRY_CONFIG={dir}/config.toml GANTRY_STATE_DIR={dir}/state GANTRY_ROOTS={dir}/root {gantry}\"\n",
            user = user(),
            port = self.port,
            key = key.private().display(),
            gantry = crate::gantry(),
        )
    }

    /// Live processes of this machine's: those whose environment names its directory (its
    /// gantry and every command it runs have its HOME).
    pub fn processes(&self) -> Vec<u32> {
        let needle = self.dir.path().display().to_string();
        let me = std::process::id();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me)
            .filter(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)) == Some("Z");
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                !zombie && String::from_utf8_lossy(&environ).contains(&needle)
            })
            .collect()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.stop_sshd();
    }
}
