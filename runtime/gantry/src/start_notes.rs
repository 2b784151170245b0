//! What `gantry serve` says on stderr once its URLs are on stdout: the connectors it does not
//! serve and why, and what to do next. stderr, so stdout stays the lines a script reads.

use server::app::App;

/// The lines, without their newlines.
pub fn lines(app: &App, admin: bool) -> Vec<String> {
    let mut out = Vec::new();
    let off = app.not_served();
    if !off.is_empty() {
        let list: Vec<String> = off
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        out.push(format!("not served: {}", list.join("; ")));
    }
    let settings = &app.settings;
    let approve = if admin {
        "on the control page (the admin URL) or with `gantry auth approve CODE`"
    } else {
        "with `gantry auth approve CODE`"
    };
    let core = generated::core::NAME;
    out.push(match &settings.public_host {
        Some(_) if settings.auth_of(core).oauth() => format!(
            "next: in ChatGPT (Settings, Apps & Connectors, Advanced, Developer mode, Create), give the {core}@public URL with Authentication OAuth, then approve the code its sign-in page shows {approve}"
        ),
        Some(_) => format!(
            "next: in ChatGPT (Settings, Apps & Connectors, Advanced, Developer mode, Create), give the {core}@public URL with No authentication (its secret is in the URL)"
        ),
        None => "next: for Claude Desktop, Claude Code, Codex or Cursor, `gantry config <client>` prints the setup to paste; for ChatGPT, start a tunnel and serve with --public-host <its name> (docs/CHATGPT.md)".to_string(),
    });
    out
}
