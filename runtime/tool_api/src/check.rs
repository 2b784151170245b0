//! Bound checks generated `Validate` impls call. Each names the field by its JSON path
//! (`ranges[2].start_line`) and says what was expected and what arrived.

use crate::ToolError;

/// `at.name`, or `name` at the top level.
pub fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}.{name}")
    }
}

/// `at.name[i]`.
pub fn index(at: &str, name: &str, i: usize) -> String {
    format!("{}[{i}]", join(at, name))
}

/// String length in characters.
pub fn length(
    at: &str,
    name: &str,
    value: &str,
    min: Option<u64>,
    max: Option<u64>,
) -> Result<(), ToolError> {
    // Counting stops just past the maximum, so a huge value costs no more than a small one.
    let limit = max.map_or(usize::MAX, |m| {
        usize::try_from(m).unwrap_or(usize::MAX).saturating_add(1)
    });
    let n = value.chars().take(limit).count() as u64;
    if let Some(max) = max
        && n > max
    {
        return Err(ToolError::invalid_input(format!(
            "{}: longer than {max} characters",
            join(at, name)
        )));
    }
    if let Some(min) = min
        && n < min
    {
        return Err(ToolError::invalid_input(format!(
            "{}: shorter than {min} characters",
            join(at, name)
        )));
    }
    Ok(())
}

/// Integer range.
pub fn range(
    at: &str,
    name: &str,
    value: i64,
    min: Option<i64>,
    max: Option<i64>,
) -> Result<(), ToolError> {
    if let Some(min) = min
        && value < min
    {
        return Err(ToolError::invalid_input(format!(
            "{}: {value} is below the minimum {min}",
            join(at, name)
        )));
    }
    if let Some(max) = max
        && value > max
    {
        return Err(ToolError::invalid_input(format!(
            "{}: {value} is above the maximum {max}",
            join(at, name)
        )));
    }
    Ok(())
}

/// Array length.
pub fn items(
    at: &str,
    name: &str,
    len: usize,
    min: Option<u64>,
    max: Option<u64>,
) -> Result<(), ToolError> {
    let n = len as u64;
    if let Some(max) = max
        && n > max
    {
        return Err(ToolError::invalid_input(format!(
            "{}: {n} items, at most {max} allowed",
            join(at, name)
        )));
    }
    if let Some(min) = min
        && n < min
    {
        return Err(ToolError::invalid_input(format!(
            "{}: {n} items, at least {min} needed",
            join(at, name)
        )));
    }
    Ok(())
}

fn names(group: &[(&str, bool)]) -> String {
    group
        .iter()
        .map(|(n, _)| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Exactly one of the fields must be present.
pub fn exactly_one_of(at: &str, group: &[(&str, bool)]) -> Result<(), ToolError> {
    let given: Vec<&str> = group
        .iter()
        .filter(|(_, present)| *present)
        .map(|(n, _)| *n)
        .collect();
    match given.len() {
        1 => Ok(()),
        0 => Err(ToolError::invalid_input(format!(
            "{}give exactly one of {}",
            prefix(at),
            names(group)
        ))),
        _ => Err(ToolError::invalid_input(format!(
            "{}give exactly one of {}, not {}",
            prefix(at),
            names(group),
            given
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        ))),
    }
}

/// At least one of the fields must be present.
pub fn at_least_one_of(at: &str, group: &[(&str, bool)]) -> Result<(), ToolError> {
    if group.iter().any(|(_, present)| *present) {
        Ok(())
    } else {
        Err(ToolError::invalid_input(format!(
            "{}give at least one of {}",
            prefix(at),
            names(group)
        )))
    }
}

fn prefix(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!("{at}: ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field_path() {
        let e = range("ranges[2]", "start_line", 0, Some(1), None)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("INVALID_INPUT: ranges[2].start_line: 0 is below the minimum 1")
        );
        let e = items("", "cmds", 21, Some(1), Some(20))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("INVALID_INPUT: cmds: 21 items, at most 20 allowed")
        );
        let e = length("", "cmd", "héllo", None, Some(4))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("INVALID_INPUT: cmd: longer than 4 characters")
        );
        assert!(length("", "cmd", "héll", None, Some(4)).is_ok());
    }

    #[test]
    fn groups_say_what_was_given() {
        let both = exactly_one_of("", &[("cmd", true), ("cmds", true)])
            .err()
            .map(|e| e.message);
        assert_eq!(
            both.as_deref(),
            Some("give exactly one of `cmd`, `cmds`, not `cmd` and `cmds`")
        );
        let none = exactly_one_of("", &[("cmd", false), ("cmds", false)])
            .err()
            .map(|e| e.message);
        assert_eq!(none.as_deref(), Some("give exactly one of `cmd`, `cmds`"));
        assert!(at_least_one_of("", &[("paths", false), ("ranges", true)]).is_ok());
    }
}
