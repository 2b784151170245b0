//! The config parser: any file either gives settings or errors that name the file and a line,
//! never a panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn dir() -> &'static tempfile::TempDir {
    static D: OnceLock<tempfile::TempDir> = OnceLock::new();
    D.get_or_init(|| tempfile::tempdir().expect("temp dir"))
}

fuzz_target!(|data: &[u8]| {
    let path = dir().path().join("config.toml");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let args = config::cli::CommonArgs {
        config: Some(path.clone()),
        state_dir: Some(dir().path().join("state")),
        ..Default::default()
    };
    if let Err(errors) = config::Settings::resolve(&args) {
        assert!(!errors.is_empty());
        for e in errors {
            let shown = e.to_string();
            assert!(shown.len() < 8192, "unbounded error");
        }
    }
});
