//! The control page's HTML, rendered on the server (plain forms, so every switch works with
//! the keyboard and without scripts), and its small script and stylesheet.

use std::fmt::Write as _;

use config::cli::Client;
use server::permissions::PermissionState;

/// The clients whose setups the page shows, with their labels.
pub const CLIENTS: &[(&str, Client)] = &[
    ("ChatGPT", Client::Chatgpt),
    ("Claude Desktop", Client::ClaudeDesktop),
    ("Claude Code", Client::ClaudeCode),
    ("Codex", Client::Codex),
    ("Cursor", Client::Cursor),
    ("MCP Inspector", Client::Inspector),
];

/// One connector as the page shows it.
pub struct Connector {
    pub name: &'static str,
    pub title: &'static str,
    pub local: String,
    pub public: Option<String>,
    /// It signs in with OAuth: its URLs hold no secret.
    pub oauth: bool,
    pub snippets: Vec<(&'static str, String)>,
}

/// Everything the page shows.
pub struct View<'a> {
    pub csrf: &'a str,
    pub said: Option<&'a str>,
    pub broken: Option<&'a str>,
    pub read_only: bool,
    pub read_only_fixed: Option<String>,
    pub permissions: &'a PermissionState,
    pub roots: Vec<String>,
    pub roots_fixed: Option<String>,
    pub connectors: Vec<Connector>,
    pub sessions: Vec<terminal::Listed>,
    /// The worker run, as `status` renders it, when there is one.
    pub workers: Option<String>,
    pub recorded_query: &'a str,
    pub recorded: String,
    pub config_path: String,
    pub tools: Vec<&'static str>,
    /// The OAuth sign-ins, when a public host is set: requests waiting, grants in force.
    pub sign_ins: Option<(Vec<oauth::PendingView>, Vec<oauth::GrantView>)>,
}

/// A time as the page shows it (UTC, to the second).
/// The sign-in section: each waiting request with its code to compare, each grant to end.
fn sign_ins(
    p: &mut String,
    csrf: &str,
    pending: &[oauth::PendingView],
    grants: &[oauth::GrantView],
) {
    p.push_str("<section id=\"sign-ins\" aria-labelledby=\"h-sign-ins\"><h2 id=\"h-sign-ins\">Sign-ins</h2><p>A client signing in to a public connector waits here until you approve it. Anyone who reaches the public host can start a request and give any name, so approve by typing the code <em>your</em> sign-in page shows: a request you did not start never shows you its code.</p>");
    let _ = write!(
        p,
        "<form method=\"post\" action=\"auth/decide\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><label for=\"sign-in-code\">Code your sign-in page shows</label> <input id=\"sign-in-code\" name=\"code\" type=\"text\" required autocomplete=\"off\" placeholder=\"XXXX-XXXX\"> <button type=\"submit\" name=\"decide\" value=\"approve\">Approve</button> <button type=\"submit\" name=\"decide\" value=\"deny\">Refuse</button></form>",
        esc(csrf)
    );
    // Neither a code nor a button per row: a row's name is whatever the requester chose,
    // so a decision is made only on the code the user's own sign-in page shows.
    p.push_str("<table><caption>Waiting (reload to see new ones; each expires after 5 minutes)</caption><thead><tr><th scope=\"col\">Client says it is</th><th scope=\"col\">Vouched for by</th><th scope=\"col\">Its redirect host</th><th scope=\"col\">Connector</th><th scope=\"col\">Since</th></tr></thead><tbody>");
    if pending.is_empty() {
        p.push_str("<tr><td colspan=\"5\">None.</td></tr>");
    }
    for r in pending {
        let _ = write!(
            p,
            "<tr data-pending><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.client_name),
            esc(r
                .client_site
                .as_deref()
                .unwrap_or("nobody: it registered itself")),
            esc(&r.redirect_host),
            esc(&r.connector),
            audit::rfc3339_seconds(r.created_ms),
        );
    }
    p.push_str("</tbody></table><table><caption>Clients signed in</caption><thead><tr><th scope=\"col\">Client</th><th scope=\"col\">Connector</th><th scope=\"col\">Signed in</th><th scope=\"col\">Last used</th><th scope=\"col\">End</th></tr></thead><tbody>");
    if grants.is_empty() {
        p.push_str("<tr><td colspan=\"5\">None.</td></tr>");
    }
    for g in grants {
        let _ = write!(
            p,
            "<tr data-grant=\"{}\"><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.id),
            esc(&oauth::described(&g.client_name, g.client_site.as_deref())),
            esc(&g.connector),
            audit::rfc3339_seconds(g.created_ms),
            audit::rfc3339_seconds(g.last_used_ms),
            button_form(
                "auth/revoke",
                csrf,
                &[("grant", &g.id)],
                "Revoke",
                &format!("Revoke {} on {}", g.client_name, g.connector)
            ),
        );
    }
    p.push_str("</tbody></table></section>");
}

/// Text made safe for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A form of one button that posts `fields` to `action`.
fn button_form(
    action: &str,
    csrf: &str,
    fields: &[(&str, &str)],
    label: &str,
    aria: &str,
) -> String {
    let mut f = format!(
        "<form method=\"post\" action=\"{}\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(action),
        esc(csrf)
    );
    for (k, v) in fields {
        let _ = write!(
            f,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(k),
            esc(v)
        );
    }
    let _ = write!(
        f,
        "<button type=\"submit\" aria-label=\"{}\">{}</button></form>",
        esc(aria),
        esc(label)
    );
    f
}

fn copyable(id: &str, label: &str, text: &str) -> String {
    format!(
        "<div class=\"copy\"><label for=\"{id}\">{}</label><input id=\"{id}\" type=\"text\" readonly value=\"{}\"><button type=\"button\" data-copy=\"{id}\">Copy</button></div>",
        esc(label),
        esc(text)
    )
}

fn duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// The running command sessions, as table rows with a kill button each.
pub fn sessions(list: &[terminal::Listed], csrf: &str) -> String {
    if list.is_empty() {
        return "<tr><td colspan=\"6\">No command is running.</td></tr>".into();
    }
    let mut rows = String::new();
    for s in list {
        let id = s.id.to_string();
        let _ = write!(
            rows,
            "<tr data-session=\"{id}\"><td>{id}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.command),
            esc(s.owner.split('/').next().unwrap_or("")),
            duration(s.age),
            if s.exited {
                "exited".to_string()
            } else {
                format!("idle {}", duration(s.idle))
            },
            button_form(
                "sessions/kill",
                csrf,
                &[("id", &id)],
                "Kill",
                &format!("Kill session {id}")
            ),
        );
    }
    rows
}

/// The whole page.
pub fn render(v: &View<'_>) -> String {
    let mut p = String::with_capacity(16 << 10);
    p.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>gantry control</title><link rel=\"stylesheet\" href=\"style.css\"><script src=\"app.js\" defer></script></head><body>");
    p.push_str("<header><h1>gantry control</h1><nav aria-label=\"Sections\"><a href=\"#connectors\">Connectors</a> <a href=\"#sign-ins\">Sign-ins</a> <a href=\"#permissions\">Permissions</a> <a href=\"#roots\">Roots</a> <a href=\"#sessions\">Commands</a> <a href=\"#workers\">Workers</a> <a href=\"#recorded\">Recorded</a> <a href=\"#audit\">Audit</a></nav></header><main>");
    let _ = write!(
        p,
        "<div id=\"said\" role=\"status\" aria-live=\"polite\">{}</div>",
        v.said.map(esc).unwrap_or_default()
    );
    if let Some(why) = v.broken {
        let _ = write!(
            p,
            "<div role=\"alert\" class=\"alert\">Every call is refused until this is fixed: {}</div>",
            esc(why)
        );
    }

    // Connectors.
    p.push_str("<section id=\"connectors\" aria-labelledby=\"h-connectors\"><h2 id=\"h-connectors\">Connectors</h2><p>A URL that holds its connector's secret opens the connector to whoever has it; a connector that signs in with OAuth opens only to clients you approved under Sign-ins.</p>");
    for c in &v.connectors {
        let _ = write!(
            p,
            "<h3>{} <small>({})</small></h3>",
            esc(c.title),
            esc(c.name)
        );
        p.push_str(&copyable(&format!("url-{}", c.name), "Local URL", &c.local));
        if let Some(public) = &c.public {
            p.push_str(&copyable(
                &format!("public-{}", c.name),
                if c.oauth {
                    "Public URL (paste into ChatGPT, with OAuth as its authentication)"
                } else {
                    "Public URL (paste into ChatGPT)"
                },
                public,
            ));
        }
        p.push_str(&button_form(
            "tokens/rotate",
            v.csrf,
            &[("connector", c.name)],
            "Rotate secret",
            &format!("Rotate the secret of {}", c.name),
        ));
        for (i, (label, text)) in c.snippets.iter().enumerate() {
            let id = format!("snippet-{}-{i}", c.name);
            let _ = write!(
                p,
                "<details><summary>{}</summary><pre id=\"{id}\">{}</pre><button type=\"button\" data-copy=\"{id}\">Copy</button></details>",
                esc(label),
                esc(text)
            );
        }
    }
    p.push_str("</section>");

    if let Some((pending, grants)) = &v.sign_ins {
        sign_ins(&mut p, v.csrf, pending, grants);
    }

    // Permissions.
    let _ = write!(
        p,
        "<section id=\"permissions\" aria-labelledby=\"h-permissions\"><h2 id=\"h-permissions\">Permissions</h2><p>Written to <code>{}</code>, comments kept; they apply from the next call, as a hand edit does. Clients that cache the tool list (ChatGPT) need a Refresh to see a change.</p>",
        esc(&v.config_path)
    );
    p.push_str("<table><caption>What the model may do</caption><thead><tr><th scope=\"col\">Permission</th><th scope=\"col\">What it allows</th><th scope=\"col\">State</th><th scope=\"col\">Change</th></tr></thead><tbody>");
    let ro_state = if v.read_only { "on" } else { "off" };
    let ro_change = match &v.read_only_fixed {
        Some(from) => format!("set by {}", esc(from)),
        None => button_form(
            "read-only",
            v.csrf,
            &[("on", if v.read_only { "false" } else { "true" })],
            if v.read_only { "Turn off" } else { "Turn on" },
            if v.read_only {
                "Turn read-only mode off"
            } else {
                "Turn read-only mode on"
            },
        ),
    };
    let _ = write!(
        p,
        "<tr data-permission=\"read_only\"><th scope=\"row\">read-only mode</th><td>Refuse everything that changes state, whatever the switches below say.</td><td class=\"state\">{ro_state}</td><td>{ro_change}</td></tr>"
    );
    for spec in generated::PERMISSIONS {
        let chosen = v.permissions.chosen(spec.name);
        let effective = v.permissions.effective(spec.name);
        let state = match (chosen, effective, v.permissions.masked_by(spec.name)) {
            (_, true, _) => "on".to_string(),
            (true, false, Some(why)) => format!("on, not in effect: {}", esc(why)),
            (false, _, Some(why)) if why != "read-only mode" => {
                format!("off (and not in effect: {})", esc(why))
            }
            _ => "off".to_string(),
        };
        let change = button_form(
            "permission",
            v.csrf,
            &[
                ("name", spec.name),
                ("on", if chosen { "false" } else { "true" }),
            ],
            if chosen { "Turn off" } else { "Turn on" },
            &format!("Turn {} {}", spec.name, if chosen { "off" } else { "on" }),
        );
        let _ = write!(
            p,
            "<tr data-permission=\"{name}\"><th scope=\"row\">{name}</th><td>{}</td><td class=\"state\">{state}</td><td>{change}</td></tr>",
            esc(spec.description),
            name = esc(spec.name),
        );
    }
    p.push_str("</tbody></table></section>");

    // Roots.
    p.push_str("<section id=\"roots\" aria-labelledby=\"h-roots\"><h2 id=\"h-roots\">Approved roots</h2><p>File tools reach only below these directories; gantry's own files stay out of reach wherever they are.</p><ul>");
    for root in &v.roots {
        let remove = match &v.roots_fixed {
            Some(_) => String::new(),
            None => button_form(
                "roots/remove",
                v.csrf,
                &[("path", root)],
                "Remove",
                &format!("Remove root {root}"),
            ),
        };
        let _ = write!(p, "<li><code>{}</code> {remove}</li>", esc(root));
    }
    p.push_str("</ul>");
    match &v.roots_fixed {
        Some(from) => {
            let _ = write!(
                p,
                "<p>The roots are set by {} for this run; restart without it to manage them here.</p>",
                esc(from)
            );
        }
        None => {
            let _ = write!(
                p,
                "<form method=\"post\" action=\"roots/add\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><label for=\"root-path\">Directory to add (absolute path)</label> <input id=\"root-path\" name=\"path\" type=\"text\" required> <button type=\"submit\">Add root</button></form>",
                esc(v.csrf)
            );
        }
    }
    p.push_str("</section>");

    // Command sessions.
    let _ = write!(
        p,
        "<section id=\"sessions\" aria-labelledby=\"h-sessions\"><h2 id=\"h-sessions\">Running commands</h2><table><caption>Command sessions (refreshed every few seconds)</caption><thead><tr><th scope=\"col\">Session</th><th scope=\"col\">Command</th><th scope=\"col\">Connector</th><th scope=\"col\">Age</th><th scope=\"col\">State</th><th scope=\"col\">End</th></tr></thead><tbody id=\"session-rows\">{}</tbody></table></section>",
        sessions(&v.sessions, v.csrf)
    );

    // Worker agents.
    p.push_str("<section id=\"workers\" aria-labelledby=\"h-workers\"><h2 id=\"h-workers\">Worker agents</h2>");
    match &v.workers {
        Some(run) => {
            let _ = write!(p, "<pre class=\"recorded\">{}</pre>", esc(run));
            p.push_str(&button_form(
                "agents/end",
                v.csrf,
                &[],
                "End the run",
                "End the worker run: stop its programs and finish its workers",
            ));
        }
        None => p.push_str("<p>No worker run.</p>"),
    }
    p.push_str("</section>");

    // Recorded sessions.
    let _ = write!(
        p,
        "<section id=\"recorded\" aria-labelledby=\"h-recorded\"><h2 id=\"h-recorded\">Recorded sessions</h2><form method=\"get\" action=\"./#recorded\"><label for=\"recorded-q\">Search</label> <input id=\"recorded-q\" name=\"q\" type=\"search\" value=\"{}\"> <button type=\"submit\">Search</button></form><pre class=\"recorded\">{}</pre></section>",
        esc(v.recorded_query),
        esc(&v.recorded)
    );

    // Audit.
    p.push_str("<section id=\"audit\" aria-labelledby=\"h-audit\"><h2 id=\"h-audit\">Audit log (live)</h2><form id=\"audit-filter\"><label for=\"audit-tool\">Tool</label> <select id=\"audit-tool\" name=\"tool\"><option value=\"\">any</option>");
    for t in &v.tools {
        let _ = write!(p, "<option>{}</option>", esc(t));
    }
    p.push_str("</select> <label for=\"audit-decision\">Decision</label> <select id=\"audit-decision\" name=\"decision\"><option value=\"\">any</option><option>allow</option><option>deny</option><option>none</option></select></form><table><caption>Newest first</caption><thead><tr><th scope=\"col\">Time</th><th scope=\"col\">Connector</th><th scope=\"col\">Tool</th><th scope=\"col\">Decision</th><th scope=\"col\">Outcome</th><th scope=\"col\">Target</th></tr></thead><tbody id=\"audit-rows\" aria-live=\"polite\"></tbody></table><noscript><p>The live tail needs JavaScript; <code>gantry audit --follow</code> shows the same lines.</p></noscript></section>");
    p.push_str("</main></body></html>");
    p
}

/// The page's script: copy buttons, the live audit tail, and the refreshing session list.
pub const SCRIPT: &str = r#""use strict";
document.addEventListener("click", async (e) => {
  const b = e.target.closest("button[data-copy]");
  if (!b) return;
  const el = document.getElementById(b.dataset.copy);
  const text = el.value !== undefined ? el.value : el.textContent;
  try { await navigator.clipboard.writeText(text); b.textContent = "Copied"; }
  catch { if (el.select) { el.select(); document.execCommand("copy"); b.textContent = "Copied"; } }
  setTimeout(() => { b.textContent = "Copy"; }, 1500);
});
let source = null;
function cell(row, text) { const td = document.createElement("td"); td.textContent = text; row.appendChild(td); }
function tail() {
  if (source) source.close();
  const rows = document.getElementById("audit-rows");
  rows.replaceChildren();
  const q = new URLSearchParams(new FormData(document.getElementById("audit-filter")));
  source = new EventSource("audit?" + q.toString());
  source.onmessage = (m) => {
    let line; try { line = JSON.parse(m.data); } catch { return; }
    const row = document.createElement("tr");
    row.className = "decision-" + line.decision;
    cell(row, line.time);
    cell(row, line.connector); cell(row, line.tool); cell(row, line.decision); cell(row, line.outcome);
    // The first decision is often about the whole machine (Host); show what the call touched.
    const ds = line.decisions || [];
    const d = ds.find((x) => x.resource_type !== "Host") || ds[0];
    cell(row, d ? d.resource : "");
    rows.prepend(row);
    while (rows.children.length > 200) rows.lastChild.remove();
  };
}
async function refreshSessions() {
  try {
    const r = await fetch("fragment/sessions", { cache: "no-store" });
    if (r.ok) document.getElementById("session-rows").innerHTML = await r.text();
  } catch { /* the server is gone or restarting: keep the last list */ }
}
document.addEventListener("DOMContentLoaded", () => {
  const f = document.getElementById("audit-filter");
  f.addEventListener("change", tail);
  f.addEventListener("submit", (e) => { e.preventDefault(); tail(); });
  tail();
  setInterval(refreshSessions, 3000);
});
"#;

/// The page's stylesheet.
pub const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}\
header{background:#20232a;color:#fff;padding:.6em 1.2em}header h1{margin:0;font-size:1.3em}\
header a{color:#cde;margin-right:.8em}main{padding:0 1.2em 2em;max-width:72em}\
section{margin-top:1.6em}table{border-collapse:collapse;width:100%}caption{text-align:left;font-weight:600;padding:.3em 0}\
th,td{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}\
.inline{display:inline}button{white-space:nowrap}.copy{display:flex;gap:.5em;align-items:center;margin:.3em 0}.copy input{flex:1;font-family:monospace}\
pre{background:#f0f0f0;padding:.6em;overflow:auto;white-space:pre-wrap}.alert{background:#fde2e1;border:1px solid #c00;padding:.6em}\
#said:not(:empty){background:#e6f4ea;border:1px solid #2a7;padding:.5em;margin-top:1em}\
.decision-deny td{color:#a00}button{padding:.2em .7em}\
:focus-visible{outline:3px solid #36f;outline-offset:2px}";
