//! `browser.open` (the Shell connector, seed 002's milestone 2): an address parsed, decided by
//! Cedar on its scheme and host, and handed as one argument to the configured browser
//! command, which starts without a shell.

use std::process::Stdio;

use generated::resources::Url;
use generated::shell::{BrowserOpenArgs, BrowserOpenOutput, actions};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::path_policy::Roots;
use crate::ops::program;

/// Opens `args.url` with `browser`'s command.
pub(super) async fn open(
    browser: &config::browser::BrowserConfig,
    roots: &Roots,
    cx: &CallContext,
    args: BrowserOpenArgs,
) -> Result<Reply<BrowserOpenOutput>, ToolError> {
    let given = args.url.trim();
    let url = url::Url::parse(given).map_err(|e| {
        ToolError::invalid_input(format!("url: `{given}` is not an absolute address: {e}"))
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ToolError::invalid_input(
            "url: an address with a user name or password in it is not opened",
        ));
    }
    let host = url.host_str().unwrap_or_default().to_lowercase();
    let resource = Url {
        id: url.as_str().chars().take(2048).collect(),
        scheme: url.scheme().to_string(),
        host_allowed: browser.allows_host(&host),
        host,
    };
    cx.authorize(actions::BROWSER_OPEN, &resource, ())
        .map_err(|e| e.at("url"))?;
    let argv = browser.command_line(url.as_str());
    let Some((name, rest)) = argv.split_first() else {
        return Err(ToolError::new(
            ErrorCode::Internal,
            "[browser] command is empty",
        ));
    };
    // The program as it will start; one inside the roots is the model's to write.
    let exe = program::resolve(name).ok_or_else(|| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("[browser] command: `{name}` is not a program on PATH; set the browser in the config file"),
        )
    })?;
    if roots.contains(&exe) {
        return Err(ToolError::new(
            ErrorCode::CommandNotAllowed,
            format!(
                "[browser] command: `{}` lies inside the approved roots, where the model can write it; name a browser outside them",
                exe.display()
            ),
        ));
    }
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The browser outlives the call (and gantry): its own process group, so a signal to
    // gantry's does not reach it.
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| ToolError::os(format!("[browser] command `{}`", exe.display()), &e))?;
    let pid = child.id();
    // Reaped when it ends, whenever that is.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(Reply::new(BrowserOpenOutput {
        url: url.as_str().to_string(),
        pid: pid.map(i64::from),
    }))
}
