//! What a workdir holds for a coding agent, told on the first command run there: a line on
//! its AGENTS files and a catalog of the skills under `.agents/skills`. Any connector whose
//! commands name a workdir can offer it; every file is read only where the policies let that
//! connector's commands read it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tool_api::{ActionId, Authorized, CallContext, ToolError};

use crate::ops::fs;
use crate::ops::path_policy::{Kind, Resolved, Roots};

/// Longest description a catalog line keeps.
const SKILL_DESCRIPTION: usize = 200;
/// Largest SKILL.md whose front matter is read.
const SKILL_FILE: u64 = 64 * 1024;

/// The workdirs already told of; off, it tells nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct WorkdirContext {
    told: Option<Arc<Mutex<HashSet<PathBuf>>>>,
}

impl WorkdirContext {
    pub fn new(on: bool) -> Self {
        Self {
            told: on.then(Arc::default),
        }
    }

    /// The context of `workdir` the first time it is asked for (at most `max_skills`
    /// skills), read off the async thread; each file is asked about as `action` would
    /// touch it.
    pub async fn first_time(
        &self,
        roots: Arc<Roots>,
        cx: &CallContext,
        action: ActionId,
        workdir: PathBuf,
        max_skills: usize,
    ) -> Result<Option<String>, ToolError> {
        let Some(told) = self.told.clone() else {
            return Ok(None);
        };
        let cx = cx.clone();
        super::blocking(move || {
            let mut told = told.lock().unwrap_or_else(PoisonError::into_inner);
            if !told.insert(workdir.clone()) {
                return None;
            }
            drop(told);
            describe(&roots, &cx, action, &workdir, max_skills)
        })
        .await
    }
}

fn describe(
    roots: &Roots,
    cx: &CallContext,
    action: ActionId,
    workdir: &Path,
    max_skills: usize,
) -> Option<String> {
    let allowed = |p: PathBuf| -> Option<Authorized<Resolved>> {
        let resolved = roots.resolve(&p.to_string_lossy(), None).ok()?;
        // Asked first, so a file the policies keep out is skipped without a denial in the
        // audit of a command that ran.
        let resource = resolved.resource();
        if !cx.permits(action, &resource) {
            return None;
        }
        cx.authorize(action, &resource, resolved).ok()
    };
    let mut lines = Vec::new();
    let agents: Vec<&str> = ["AGENTS.override.md", "AGENTS.md"]
        .into_iter()
        .filter(|name| allowed(workdir.join(name)).is_some_and(|f| f.kind == Kind::File))
        .collect();
    match agents.as_slice() {
        [] => {}
        [one] => lines.push(format!(
            "This workdir has {one}: read it before you change anything here."
        )),
        [first, ..] => lines.push(format!(
            "This workdir has {first} (it takes precedence over AGENTS.md): read it before you change anything here."
        )),
    }
    let skills = allowed(workdir.join(".agents").join("skills"))
        .filter(|d| d.kind == Kind::Dir)
        .map(|dir| skill_catalog(&dir, &allowed, max_skills))
        .unwrap_or_default();
    if !skills.is_empty() {
        lines.push("Skills in .agents/skills (read a SKILL.md before you use it):".into());
        lines.extend(skills);
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// One line per skill directory that holds a SKILL.md: its front matter's name and
/// description (the directory's name when it has none).
fn skill_catalog(
    dir: &Authorized<Resolved>,
    allowed: &dyn Fn(PathBuf) -> Option<Authorized<Resolved>>,
    max: usize,
) -> Vec<String> {
    let Ok((entries, total)) = fs::list_dir(dir, max) else {
        return Vec::new();
    };
    let mut lines: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == confine::path_policy::Kind::Dir)
        .filter_map(|e| {
            let file = allowed(dir.path.join(&e.name).join("SKILL.md"))?;
            let whole = fs::read_all(&file, SKILL_FILE, 1).ok()?;
            let text = String::from_utf8_lossy(&whole.bytes);
            let (name, description) = front_matter(&text);
            let name = name.unwrap_or(&e.name);
            let mut line = format!(
                "- {} (.agents/skills/{}/SKILL.md)",
                one_line(name, 64),
                one_line(&e.name, 64)
            );
            if let Some(d) = description {
                line.push_str(": ");
                line.push_str(&one_line(d, SKILL_DESCRIPTION));
            }
            Some(line)
        })
        .collect();
    if total > entries.len() {
        lines.push(format!("- … {} more not listed", total - entries.len()));
    }
    lines
}

/// `name:` and `description:` of a `---` front matter block.
fn front_matter(text: &str) -> (Option<&str>, Option<&str>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return (None, None);
    }
    let (mut name, mut description) = (None, None);
    fn unquote(v: &str) -> Option<&str> {
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        (!v.is_empty()).then_some(v)
    }
    for line in lines.take_while(|l| l.trim() != "---") {
        if let Some(v) = line.strip_prefix("name:") {
            name = unquote(v);
        } else if let Some(v) = line.strip_prefix("description:") {
            description = unquote(v);
        }
    }
    (name, description)
}

/// `s` on one line of at most `max` characters, control characters dropped.
pub(super) fn one_line(s: &str, max: usize) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() > max {
        let mut cut: String = clean.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else {
        clean
    }
}
