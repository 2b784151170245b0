//! Worker kinds: how to start one of the user's agent CLIs with a task, how to resume its own
//! conversation with a new message, and how to read its conversation id and token usage from
//! what it prints. Declared under `[agents.kinds.NAME]` in the config; without any, one kind
//! per known CLI found on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use confine::path_policy::{Placement, Roots};
use serde::Deserialize;

/// Workers working at once, unless the config says otherwise.
pub const DEFAULT_SLOTS: usize = 3;
/// A conversation past this many tokens (the agent's own count) gets no further turn.
pub const DEFAULT_CEILING_TOKENS: u64 = 400_000;
/// How long a worker's program may run on after its `finish` before it is ended.
pub const DEFAULT_FINISH_GRACE: std::time::Duration = std::time::Duration::from_secs(30);
/// How long one turn may run before its program is ended (it would hold its slot forever).
pub const DEFAULT_TURN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);
/// Most slots a config may give (a run has at most 8 workers anyway).
const MAX_SLOTS: usize = 8;

/// The variable a worker's program finds its turn's secret in, for a CLI that sends it as a
/// bearer token to `{mcp_endpoint}`.
pub const TOKEN_VAR: &str = "GANTRY_WORKER_TOKEN";

/// The words a template may hold, each replaced whole.
pub const PLACEHOLDERS: [&str; 7] = [
    "{prompt}",
    "{prompt_file}",
    "{conversation}",
    "{mcp_config}",
    "{mcp_url}",
    "{mcp_endpoint}",
    "{workdir}",
];

/// The placeholders that tell a worker where gantry is (one is needed).
const REACH: [&str; 3] = ["{mcp_config}", "{mcp_url}", "{mcp_endpoint}"];

/// `[agents]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsSection {
    slots: Option<usize>,
    ceiling_tokens: Option<u64>,
    finish_grace: Option<String>,
    turn_timeout: Option<String>,
    #[serde(default)]
    kinds: BTreeMap<String, KindSection>,
}

/// `[agents.kinds.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KindSection {
    start: Vec<String>,
    resume: Vec<String>,
    conversation: String,
    #[serde(default)]
    tokens: Vec<String>,
    workdir: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// The agents settings of this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentsConfig {
    /// Workers that may work at once.
    pub slots: usize,
    /// The context ceiling, in the agent's own tokens.
    pub ceiling_tokens: u64,
    /// How long a program may run on after its worker's `finish`.
    pub finish_grace: std::time::Duration,
    /// How long one turn may run.
    pub turn_timeout: std::time::Duration,
    /// The kinds, by name.
    pub kinds: Vec<Kind>,
    /// Whether the kinds were found on PATH (none declared).
    pub kinds_from_path: bool,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            slots: DEFAULT_SLOTS,
            ceiling_tokens: DEFAULT_CEILING_TOKENS,
            finish_grace: DEFAULT_FINISH_GRACE,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            kinds: Vec::new(),
            kinds_from_path: true,
        }
    }
}

/// One worker kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// Its name (what `spawn`'s `kind` names).
    pub name: String,
    /// Program and arguments that start a worker on `{prompt}`.
    pub start: Vec<String>,
    /// Program and arguments that resume conversation `{conversation}` with `{prompt}`.
    pub resume: Vec<String>,
    /// A regular expression whose first group is the conversation id, in the output.
    pub conversation: String,
    /// Regular expressions whose first group is a token count; the conversation's size is the
    /// sum over them of each one's last match in a turn's output.
    pub tokens: Vec<String>,
    /// Where workers start (absolute); `None` for the first approved root.
    pub workdir: Option<PathBuf>,
    /// Variables set for the program.
    pub env: Vec<(String, String)>,
}

/// A setting that cannot be used: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The setting (`[agents.kinds.codex] start`).
    pub what: String,
    /// Why.
    pub reason: String,
}

/// Resolves `[agents]`; a relative `workdir` is taken from `config_dir`.
pub fn resolve(
    section: Option<AgentsSection>,
    config_dir: &Path,
) -> Result<AgentsConfig, Vec<Problem>> {
    let section = section.unwrap_or_default();
    let mut problems = Vec::new();
    let slots = section.slots.unwrap_or(DEFAULT_SLOTS);
    if !(1..=MAX_SLOTS).contains(&slots) {
        problems.push(Problem {
            what: "[agents] slots".into(),
            reason: format!("{slots} is not between 1 and {MAX_SLOTS}"),
        });
    }
    let ceiling_tokens = section.ceiling_tokens.unwrap_or(DEFAULT_CEILING_TOKENS);
    if ceiling_tokens == 0 {
        problems.push(Problem {
            what: "[agents] ceiling_tokens".into(),
            reason: "must be more than 0".into(),
        });
    }
    let mut duration =
        |what: &str, given: Option<&str>, default| match given.map(humantime::parse_duration) {
            None => default,
            Some(Ok(d)) if !d.is_zero() => d,
            Some(Ok(_)) => {
                problems.push(Problem {
                    what: format!("[agents] {what}"),
                    reason: "must be more than 0".into(),
                });
                default
            }
            Some(Err(e)) => {
                problems.push(Problem {
                    what: format!("[agents] {what}"),
                    reason: format!("not a duration such as \"30s\" or \"1h\": {e}"),
                });
                default
            }
        };
    let finish_grace = duration(
        "finish_grace",
        section.finish_grace.as_deref(),
        DEFAULT_FINISH_GRACE,
    );
    let turn_timeout = duration(
        "turn_timeout",
        section.turn_timeout.as_deref(),
        DEFAULT_TURN_TIMEOUT,
    );
    let kinds_from_path = section.kinds.is_empty();
    let kinds = if kinds_from_path {
        found_on_path()
    } else {
        section
            .kinds
            .into_iter()
            .filter_map(|(name, k)| match kind_of(&name, k, config_dir) {
                Ok(kind) => Some(kind),
                Err(mut p) => {
                    problems.append(&mut p);
                    None
                }
            })
            .collect()
    };
    if problems.is_empty() {
        Ok(AgentsConfig {
            slots,
            ceiling_tokens,
            finish_grace,
            turn_timeout,
            kinds,
            kinds_from_path,
        })
    } else {
        Err(problems)
    }
}

fn kind_of(name: &str, k: KindSection, config_dir: &Path) -> Result<Kind, Vec<Problem>> {
    let at = |field: &str| format!("[agents.kinds.{name}] {field}");
    let mut problems = Vec::new();
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        problems.push(Problem {
            what: format!("[agents.kinds.{name}]"),
            reason: "a kind's name is 1 to 64 letters, digits, `_` or `-`".into(),
        });
    }
    for (field, argv, needs) in [
        ("start", &k.start, &[][..]),
        ("resume", &k.resume, &["{conversation}"][..]),
    ] {
        if argv.first().is_none_or(|p| p.trim().is_empty()) {
            problems.push(Problem {
                what: at(field),
                reason:
                    "give the program and its arguments, e.g. [\"codex\", \"exec\", \"{prompt}\"]"
                        .into(),
            });
            continue;
        }
        if !argv
            .iter()
            .any(|w| w.contains("{prompt}") || w.contains("{prompt_file}"))
        {
            problems.push(Problem {
                what: at(field),
                reason:
                    "has neither {prompt} nor {prompt_file}, so the worker would never get its task"
                        .into(),
            });
        }
        for need in needs {
            if !argv.iter().any(|w| w.contains(need)) {
                problems.push(Problem {
                    what: at(field),
                    reason: format!("has no {need}, so the worker would never get it"),
                });
            }
        }
        if !argv.iter().any(|w| REACH.iter().any(|r| w.contains(r))) {
            problems.push(Problem {
                what: at(field),
                reason: "has none of {mcp_config}, {mcp_url}, {mcp_endpoint}: the worker could not reach gantry to hand in its result".into(),
            });
        }
        for word in argv {
            if let Some(unknown) = unknown_placeholder(word) {
                problems.push(Problem {
                    what: at(field),
                    reason: format!(
                        "`{unknown}` is not a placeholder ({})",
                        PLACEHOLDERS.join(", ")
                    ),
                });
            }
        }
    }
    for (i, pattern) in std::iter::once(&k.conversation)
        .chain(k.tokens.iter())
        .enumerate()
    {
        let field = if i == 0 {
            "conversation".to_string()
        } else {
            format!("tokens[{}]", i - 1)
        };
        match regex::Regex::new(pattern) {
            Ok(re) if re.captures_len() < 2 => problems.push(Problem {
                what: at(&field),
                reason: "needs one group `( )` around the value".into(),
            }),
            Ok(_) => {}
            Err(e) => problems.push(Problem {
                what: at(&field),
                reason: format!("not a regular expression: {e}"),
            }),
        }
    }
    let workdir = k
        .workdir
        .map(|w| crate::paths::absolute(config_dir, Path::new(&w)));
    if problems.is_empty() {
        Ok(Kind {
            name: name.to_string(),
            start: k.start,
            resume: k.resume,
            conversation: k.conversation,
            tokens: k.tokens,
            workdir,
            env: k.env.into_iter().collect(),
        })
    } else {
        Err(problems)
    }
}

/// The first `{word}` in `word` that is not a placeholder.
fn unknown_placeholder(word: &str) -> Option<String> {
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let after = &rest[open..];
        let close = after.find('}')?;
        let candidate = &after[..=close];
        let inner = &candidate[1..candidate.len() - 1];
        if inner.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            && !inner.is_empty()
            && !PLACEHOLDERS.contains(&candidate)
        {
            return Some(candidate.to_string());
        }
        rest = &after[close + 1..];
    }
    None
}

/// The kinds gantry knows by heart, for the CLIs found on PATH. Codex gets gantry as a
/// Streamable HTTP MCP server through `-c`, Claude Code through a private `--mcp-config`
/// file; both print machine-readable output gantry reads the conversation id and usage from.
pub fn known_kinds() -> Vec<Kind> {
    // The secret reaches Codex as a bearer token from the environment, never in its
    // command line (which every local user can read).
    let codex_url = "mcp_servers.gantry.url=\"{mcp_endpoint}\"".to_string();
    let codex_token = format!("mcp_servers.gantry.bearer_token_env_var=\"{}\"", TOKEN_VAR);
    let claude_tail = |prompt_first: Vec<&str>| -> Vec<String> {
        let mut v: Vec<String> = prompt_first.into_iter().map(String::from).collect();
        v.extend(
            [
                "--output-format",
                "json",
                "--mcp-config",
                "{mcp_config}",
                "--strict-mcp-config",
                "--allowedTools",
                "mcp__gantry",
            ]
            .map(String::from),
        );
        v
    };
    let codex = |tail: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            &codex_url,
            "-c",
            &codex_token,
        ]
        .map(String::from)
        .to_vec();
        v.extend(tail.iter().map(|w| (*w).to_string()));
        v
    };
    vec![
        Kind {
            name: "codex".into(),
            start: codex(&["{prompt}"]),
            resume: codex(&["resume", "{conversation}", "{prompt}"]),
            conversation: r#""thread_id"\s*:\s*"([^"]+)""#.into(),
            tokens: vec![
                r#""input_tokens"\s*:\s*(\d+)"#.into(),
                r#""output_tokens"\s*:\s*(\d+)"#.into(),
            ],
            workdir: None,
            env: Vec::new(),
        },
        Kind {
            name: "claude".into(),
            start: claude_tail(vec!["claude", "-p", "{prompt}"]),
            resume: claude_tail(vec![
                "claude",
                "-p",
                "{prompt}",
                "--resume",
                "{conversation}",
            ]),
            conversation: r#""session_id"\s*:\s*"([^"]+)""#.into(),
            tokens: vec![
                r#""input_tokens"\s*:\s*(\d+)"#.into(),
                r#""cache_creation_input_tokens"\s*:\s*(\d+)"#.into(),
                r#""cache_read_input_tokens"\s*:\s*(\d+)"#.into(),
                r#""output_tokens"\s*:\s*(\d+)"#.into(),
            ],
            workdir: None,
            env: Vec::new(),
        },
    ]
}

/// What would make a kind fail at its first `spawn` although the config reads well: its
/// program not on PATH, its workdir missing or outside `roots`. For `gantry check`.
pub fn kind_problems(config: &AgentsConfig, roots: &Roots) -> Vec<String> {
    let mut found = Vec::new();
    for k in &config.kinds {
        if let Some(program) = k.start.first() {
            let given = Path::new(program);
            let there = if given.components().count() > 1 {
                terminal::programs::is_program(given)
            } else {
                terminal::programs::on_path(program).is_some()
            };
            if !there {
                found.push(format!(
                    "worker kind `{}`: its program `{program}` is not on PATH here (gantry starts it in your login environment, whose PATH may differ)",
                    k.name
                ));
            }
        }
        if let Some(dir) = &k.workdir {
            match roots.configured_dir(dir) {
                Ok(_) => {}
                Err(Placement::Outside) => found.push(format!(
                    "worker kind `{}`: its workdir {} is outside the approved roots; spawn will refuse it",
                    k.name,
                    dir.display()
                )),
                Err(Placement::Unusable(e)) => found.push(format!(
                    "worker kind `{}`: its workdir {}: {e}",
                    k.name,
                    dir.display()
                )),
            }
        }
    }
    found
}

/// The names of the CLIs gantry has a kind for by heart.
pub fn known_names() -> Vec<String> {
    known_kinds().into_iter().map(|k| k.name).collect()
}

/// The known kinds whose program is on PATH.
fn found_on_path() -> Vec<Kind> {
    known_kinds()
        .into_iter()
        .filter(|k| {
            k.start
                .first()
                .is_some_and(|program| terminal::programs::on_path(program).is_some())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> Option<AgentsSection> {
        #[derive(Deserialize)]
        struct File {
            agents: Option<AgentsSection>,
        }
        toml::from_str::<File>(text).unwrap().agents
    }

    #[test]
    fn a_declared_kind_is_checked_field_by_field() {
        let problems = resolve(
            section(
                r#"
[agents]
slots = 9
[agents.kinds.bad]
start = ["agent", "{task}"]
resume = ["agent", "{prompt}", "{mcp_url}"]
conversation = "no group"
tokens = ["("]
"#,
            ),
            Path::new("/cfg"),
        )
        .unwrap_err();
        let shown: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.what, p.reason))
            .collect();
        let all = shown.join("\n");
        for needle in [
            "[agents] slots: 9 is not between 1 and 8",
            "[agents.kinds.bad] start: has neither {prompt} nor {prompt_file}",
            "[agents.kinds.bad] start: has none of {mcp_config}, {mcp_url}, {mcp_endpoint}",
            "[agents.kinds.bad] start: `{task}` is not a placeholder",
            "[agents.kinds.bad] resume: has no {conversation}",
            "[agents.kinds.bad] conversation: needs one group",
            "[agents.kinds.bad] tokens[0]: not a regular expression",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }

    #[test]
    fn a_good_kind_resolves_with_its_workdir_from_the_config_directory() {
        let config = resolve(
            section(
                r#"
[agents]
ceiling_tokens = 5000
[agents.kinds.fake]
start = ["python3", "agent.py", "{mcp_config}", "{prompt}"]
resume = ["python3", "agent.py", "{mcp_config}", "--resume", "{conversation}", "{prompt}"]
conversation = '"conversation": "([^"]+)"'
tokens = ['"tokens": (\d+)']
workdir = "work"
"#,
            ),
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(config.ceiling_tokens, 5000);
        assert!(!config.kinds_from_path);
        assert_eq!(
            config.kinds[0].workdir.as_deref(),
            Some(Path::new("/cfg/work"))
        );
    }

    /// The kinds gantry knows by heart pass the checks a declared kind must.
    #[test]
    fn the_known_kinds_pass_the_declared_kinds_checks() {
        for k in known_kinds() {
            let section = KindSection {
                start: k.start.clone(),
                resume: k.resume.clone(),
                conversation: k.conversation.clone(),
                tokens: k.tokens.clone(),
                workdir: None,
                env: BTreeMap::new(),
            };
            let back = kind_of(&k.name, section, Path::new("/")).unwrap();
            assert_eq!(back, k);
        }
    }
}
