use super::*;

const SURFACE: &str = include_str!("../../../surface.toml");

fn errors(text: &str) -> Vec<String> {
    match Surface::parse("s.toml", text) {
        Ok(_) => Vec::new(),
        Err(d) => d.0.iter().map(ToString::to_string).collect(),
    }
}

fn with(extra: &str) -> String {
    format!("{SURFACE}\n{extra}")
}

#[test]
fn the_shipped_surface_is_valid() {
    assert_eq!(errors(SURFACE), Vec::<String>::new());
}

#[test]
fn unknown_permission_names_the_place_and_the_known_ones() {
    let text = SURFACE.replacen("requires = [\"read\"]", "requires = [\"raed\"]", 1);
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    let line = text
        .lines()
        .position(|l| l.contains("\"raed\""))
        .map(|i| i + 1)
        .unwrap_or(0);
    assert!(
        errs[0].starts_with(&format!("s.toml:{line}:")),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("unknown permission `raed`"), "{}", errs[0]);
    assert!(
        errs[0].contains("hint: known permissions: read, search"),
        "{}",
        errs[0]
    );
}

#[test]
fn duplicate_tool_is_refused_by_position() {
    let dup = "[tools.read]\nconnector = \"core\"\n";
    let errs = errors(&with(dup));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("duplicate key") || errs[0].contains("duplicate"),
        "{}",
        errs[0]
    );
    assert!(errs[0].starts_with("s.toml:"), "{}", errs[0]);
}

#[test]
fn case_insensitive_duplicate_is_refused() {
    let text = with(
        "[tools.Read]\nconnector = \"desktop\"\ntitle = \"x\"\ndescription = \"x\"\nrequires = [\"read\"]\nannotations = { read_only = true, destructive = false, idempotent = true, open_world = false }\n",
    );
    let errs = errors(&text);
    assert!(
        errs.iter().any(|e| e.contains("duplicate tool id `Read`")),
        "{errs:?}"
    );
}

#[test]
fn a_tool_on_two_connectors_cannot_be_written() {
    // `connector` is one value: naming two is a type error at the exact place.
    let text = SURFACE.replacen(
        "connector = \"core\"\ntitle = \"Read files\"",
        "connector = [\"core\", \"desktop\"]\ntitle = \"Read files\"",
        1,
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("invalid type"), "{}", errs[0]);
}

#[test]
fn rejected_schema_keyword_gets_a_chatgpt_hint() {
    let text = SURFACE.replacen(
        "input.patch = { type = \"string\"",
        "input.patch = { oneOf = [], type = \"string\"",
        1,
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("unknown field `oneOf`"), "{}", errs[0]);
    assert!(
        errs[0].contains("hint: ChatGPT rejects anyOf/oneOf/allOf"),
        "{}",
        errs[0]
    );
}

#[test]
fn missing_descriptions_are_all_reported_at_once() {
    let text = SURFACE
        .replacen("description = \"View a PNG", "summary = \"View a PNG", 1)
        .replacen(", description = \"Image file.\"", "", 1);
    let errs = errors(&text);
    // The first edit is an unknown key (serde stops there); fix it to see the semantic pass.
    assert!(errs[0].contains("unknown field `summary`"), "{errs:?}");
    let text = SURFACE
        .replacen("description = \"View a PNG, JPEG, GIF or WebP image inside the approved roots, downscaled to fit.\"\n", "", 1)
        .replacen(", description = \"Image file.\"", "", 1);
    let errs = errors(&text);
    // The Hosts connector's `view_image` relays this one and inherits both gaps: reported
    // for it too, under its own id.
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(
        errs[2].contains("tool `hosts_view_image` is missing a description"),
        "{}",
        errs[2]
    );
    assert!(
        errs[0].contains("tool `view_image` is missing a description"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("input `path` is missing a description"),
        "{}",
        errs[1]
    );
}

#[test]
fn arrays_need_items_and_unknown_types_are_named() {
    let text = SURFACE.replacen(
        "type = \"array\", items = \"string\", max_items = \"{max_paths}\"",
        "type = \"array\", max_items = \"{max_paths}\"",
        1,
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("array `paths` has no `items`")),
        "{errs:?}"
    );
    let text = SURFACE.replacen("items = \"LineRange\"", "items = \"LineRnage\"", 1);
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("unknown type `LineRnage`") && e.contains("LineRange")),
        "{errs:?}"
    );
}

#[test]
fn read_only_tools_cannot_need_mutating_permissions() {
    let text = SURFACE.replacen("requires = [\"read\"]", "requires = [\"write_edit\"]", 1);
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("claims readOnlyHint but needs mutating permission `write_edit`")),
        "{errs:?}"
    );
}

#[test]
fn bad_tool_names_are_refused() {
    let text = with(
        "[tools.\"read files\"]\nconnector = \"core\"\ntitle = \"x\"\ndescription = \"x\"\nrequires = [\"read\"]\nannotations = { read_only = true, destructive = false, idempotent = true, open_world = false }\n",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("tool id `read files` must match")),
        "{errs:?}"
    );
    let text = with(
        "[tools.list_files]\nname = \"fs list\"\nconnector = \"core\"\ntitle = \"x\"\ndescription = \"x\"\nrequires = [\"read\"]\nannotations = { read_only = true, destructive = false, idempotent = true, open_world = false }\n",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("tool name `fs list` must match")),
        "{errs:?}"
    );
}

/// A tool declared as `[tools.ID]` with `name = NAME` under `connector = CONNECTOR`.
fn named_tool(id: &str, name: &str, connector: &str) -> String {
    format!(
        "[tools.{id}]\nname = \"{name}\"\nconnector = \"{connector}\"\ntitle = \"x\"\ndescription = \"x\"\nrequires = [\"read\"]\nannotations = {{ read_only = true, destructive = false, idempotent = true, open_world = false }}\n"
    )
}

#[test]
fn a_name_is_unique_within_its_connector_only() {
    let elsewhere = with(&named_tool("desk_read", "read", "desktop"));
    let s = Surface::parse("surface.toml", &elsewhere).unwrap();
    let t = s.tools.iter().find(|t| t.id == "desk_read").unwrap();
    assert_eq!((t.name.as_str(), t.connector.as_str()), ("read", "desktop"));

    let twice = with(&named_tool("read_again", "read", "core"));
    let errs = errors(&twice);
    assert!(
        errs.iter()
            .any(|e| e.contains("connector `core` publishes two tools named `read`")),
        "{errs:?}"
    );
    // `fs.read` and `fs_read` would be one Rust method.
    let alike = with(&format!(
        "{}{}",
        named_tool("a_dot", "fs.read", "core"),
        named_tool("an_underscore", "fs_read", "core")
    ));
    let errs = errors(&alike);
    assert!(
        errs.iter()
            .any(|e| e.contains("publishes two tools named `fs_read`")),
        "{errs:?}"
    );
}

#[test]
fn a_tool_without_any_permission_is_refused() {
    let text = SURFACE.replacen("requires = [\"session_recording\"]\n", "", 1);
    assert_ne!(text, SURFACE);
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("tool `session` needs no permission")),
        "{errs:?}"
    );
}

#[test]
fn only_a_size_can_be_quoted_in_tokens() {
    let errs = errors(&SURFACE.replacen("{max_file:tokens}", "{max_paths:tokens}", 1));
    assert!(
        errs.iter()
            .any(|e| e.contains("`{max_paths:tokens}` quotes a limit that is not a size")),
        "{errs:?}"
    );
}

#[test]
fn an_input_needs_a_description_unless_the_tool_names_it() {
    // `cursor` is named in find's description; dropping that mention makes it unexplained.
    let errs = errors(&SURFACE.replacen("a `cursor` to go on", "a cursor to go on", 1));
    assert!(
        errs.iter()
            .any(|e| e.contains("input `cursor` is missing a description")),
        "{errs:?}"
    );
}

#[test]
fn limits_are_typed_and_shown_exactly() {
    assert_eq!(Limit::parse("256 KB"), Ok(Limit::Bytes(262_144)));
    assert_eq!(Limit::parse("20 s"), Ok(Limit::Millis(20_000)));
    assert_eq!(Limit::Bytes(262_144).to_string(), "256 KB");
    assert_eq!(Limit::Bytes(1500).to_string(), "1500 bytes");
    assert_eq!(Limit::Millis(250).to_string(), "250 ms");
    assert_eq!(Limit::Millis(120_000).to_string(), "2 min");
    assert_eq!(Limit::Count(64).to_string(), "64");
    assert!(Limit::parse("256 kb").is_err());
    assert!(Limit::parse("256KB").is_err());
}

#[test]
fn a_description_quotes_its_limits_and_nothing_else() {
    let s = Surface::parse("s.toml", SURFACE).unwrap();
    let read = s.tools.iter().find(|t| t.name == "read").unwrap();
    assert!(
        read.description
            .contains("Up to 256 KB (~66k tokens) a file, 512 KB (~132k tokens) a call"),
        "{}",
        read.description
    );
    let errs = errors(&SURFACE.replacen("{max_file:tokens} a file", "{max_files} a file", 1));
    assert!(
        errs.iter()
            .any(|e| e.contains("`{max_files}` names no limit of this tool")),
        "{errs:?}"
    );
    let errs = errors(&SURFACE.replacen("max_total = \"512 KB\"", "max_total = \"512 KiB\"", 1));
    assert!(
        errs.iter().any(|e| e.contains("unknown unit `KiB`")),
        "{errs:?}"
    );
}

#[test]
fn a_shared_output_type_must_exist_and_stand_alone() {
    let s = Surface::parse("s.toml", SURFACE).unwrap();
    let exec = s.tools.iter().find(|t| t.name == "exec_command").unwrap();
    let stdin = s.tools.iter().find(|t| t.name == "write_stdin").unwrap();
    assert_eq!(exec.output_type.as_deref(), Some("ExecResult"));
    let names = |t: &Tool| t.output.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(exec), names(stdin));
    assert!(names(exec).contains(&"exit_code".to_string()));
    let errs = errors(&SURFACE.replacen(
        "output_type = \"ExecResult\"",
        "output_type = \"ExecResults\"",
        1,
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("unknown `output_type` `ExecResults`")),
        "{errs:?}"
    );
}

#[test]
fn a_bound_may_name_a_count_limit_of_its_tool() {
    let s = Surface::parse("s.toml", SURFACE).unwrap();
    let read = s.tools.iter().find(|t| t.name == "read").unwrap();
    let paths = read.input.iter().find(|f| f.name == "paths").unwrap();
    assert_eq!(paths.bounds.max_items, Some(64));
    let errs = errors(&SURFACE.replacen(
        "max_items = \"{max_paths}\"",
        "max_items = \"{max_file}\"",
        1,
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("bound `{max_file}` of `paths` names no count limit")),
        "{errs:?}"
    );
}

#[test]
fn names_that_cannot_become_rust_are_refused_with_their_place() {
    let errs = errors(&format!(
        "{SURFACE}\n[errors.404_GONE]\ndescription = \"x\"\n"
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("error code `404_GONE` must be SCREAMING_SNAKE_CASE")),
        "{errs:?}"
    );
    let errs = errors(&format!(
        "{SURFACE}\n[permissions.self]\ndescription = \"x\"\nmutates = false\ndefault = {{ windows = true, macos = true, linux = true }}\n"
    ));
    assert!(
        errs.iter().any(|e| e.contains("permission name `self`")),
        "{errs:?}"
    );
}

#[test]
fn first_tools_must_be_the_connectors_own() {
    let text = SURFACE.replacen("first_tools = [\"observe\"]", "first_tools = [\"read\"]", 1);
    assert_ne!(text, SURFACE);
    let errs = errors(&text);
    assert!(
        errs.iter().any(|e| e.contains(
            "first_tools of connector `desktop` names `read`, which is not one of its tools"
        )),
        "{errs:?}"
    );
}

#[test]
fn an_operation_takes_only_optional_inputs_of_its_tool() {
    let text = SURFACE.replacen(
        "takes = [\"kind\", \"context\", \"tasks\"]",
        "takes = [\"kind\", \"action\", \"taks\"]",
        1,
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].contains("takes `action`, a required input"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("takes unknown input `taks`"),
        "{}",
        errs[1]
    );
    assert!(
        errs[1].contains("hint: name an input of tool `agents`"),
        "{}",
        errs[1]
    );
}

#[test]
fn a_tool_audits_only_its_own_inputs_by_a_known_kind() {
    let text = SURFACE.replacen(
        "audited = { paths = \"path\", ranges = \"path\" }",
        "audited = { pahts = \"path\", ranges = \"path\" }",
        1,
    );
    assert_ne!(text, SURFACE);
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("tool `read` audits unknown input `pahts`")),
        "{errs:?}"
    );
    let text = SURFACE.replacen(
        "audited = { paths = \"path\", ranges = \"path\" }",
        "audited = { paths = \"secret\", ranges = \"path\" }",
        1,
    );
    assert_ne!(text, SURFACE);
    assert!(!errors(&text).is_empty());
}

#[test]
fn a_relaying_tool_takes_its_own_inputs_then_the_relayed_ones() {
    let surface = Surface::parse("s.toml", SURFACE).unwrap();
    let relay = surface.tools.iter().find(|t| t.id == "hosts_read").unwrap();
    let read = surface.tools.iter().find(|t| t.id == "read").unwrap();
    assert_eq!(relay.relays.as_deref(), Some("read"));
    assert_eq!(relay.name, "read");
    let names: Vec<&str> = relay.input.iter().map(|f| f.name.as_str()).collect();
    let mut expected = vec!["host"];
    expected.extend(read.input.iter().map(|f| f.name.as_str()));
    assert_eq!(names, expected);
    assert_eq!(relay.title, read.title);
    assert_eq!(relay.description, read.description);
    assert_eq!(relay.at_least_one_of, read.at_least_one_of);
    assert!(relay.operations.is_empty());
    assert_eq!(relay.requires, ["hosts"]);
}

#[test]
fn a_relay_of_nothing_or_with_a_clashing_input_is_refused() {
    let errs = errors(&with(
        "[tools.hosts_nothing]\nconnector = \"hosts\"\nrelays = \"nothing\"\nrequires = [\"hosts\"]\n",
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("relays unknown tool `nothing`")),
        "{errs:?}"
    );
    let errs = errors(&with(
        "[tools.hosts_read2]\nname = \"read2\"\nconnector = \"hosts\"\nrelays = \"read\"\nrequires = [\"hosts\"]\ninput.paths = { type = \"string\", description = \"x\" }\n",
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("declares input `paths`, which the tool it relays has too")),
        "{errs:?}"
    );
}
