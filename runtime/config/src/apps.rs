//! `[apps.NAME]`: the applications the Shell connector's `app.launch` may start.

use serde::Deserialize;

/// What stands for the call's arguments in a command line.
pub const ARGS_PLACEHOLDER: &str = "{args}";

/// One `[apps.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    /// The program and its arguments, no shell; an argument that is exactly `{args}` stands
    /// for the call's `args` (none allowed without it).
    pub command: Vec<String>,
}

impl AppConfig {
    /// The argv that starts it with `args`, or why not.
    pub fn command_line(&self, args: &[String]) -> Result<Vec<String>, String> {
        let takes = self.command.iter().any(|a| a == ARGS_PLACEHOLDER);
        if !takes && !args.is_empty() {
            return Err(format!(
                "this application takes no arguments (its command in the config has no `{ARGS_PLACEHOLDER}`)"
            ));
        }
        Ok(self
            .command
            .iter()
            .flat_map(|a| {
                if a == ARGS_PLACEHOLDER {
                    args.to_vec()
                } else {
                    vec![a.clone()]
                }
            })
            .collect())
    }
}

/// What is wrong with entry `name`, if anything.
pub fn problems(name: &str, app: &AppConfig) -> Vec<String> {
    let mut out = Vec::new();
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !fine {
        out.push(format!(
            "[apps.{name}]: an application's name is 1 to 64 letters, digits, `-`, `_` or `.`"
        ));
    }
    match app.command.first() {
        None => out.push(format!("[apps.{name}] command: name a program")),
        Some(p) if p.trim().is_empty() || p == ARGS_PLACEHOLDER => {
            out.push(format!(
                "[apps.{name}] command: the first item must be the program"
            ));
        }
        Some(_) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_go_where_the_placeholder_stands_and_nowhere_else() {
        let app = AppConfig {
            command: vec![
                "viewer".into(),
                "--new".into(),
                "{args}".into(),
                "--end".into(),
            ],
        };
        assert_eq!(
            app.command_line(&["a b".into(), "c".into()]).unwrap(),
            ["viewer", "--new", "a b", "c", "--end"]
        );
        let fixed = AppConfig {
            command: vec!["calc".into()],
        };
        assert_eq!(fixed.command_line(&[]).unwrap(), ["calc"]);
        assert!(fixed.command_line(&["x".into()]).is_err());
        assert_eq!(problems("ok-name", &fixed), Vec::<String>::new());
        assert_eq!(problems("bad name", &fixed).len(), 1);
        let empty = AppConfig {
            command: Vec::new(),
        };
        assert_eq!(problems("e", &empty).len(), 1);
    }
}
