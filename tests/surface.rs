//! The published surface: tools/list per connector, discovery budgets, and parity between the
//! served schemas and what the decoders accept. (The schemas themselves have one golden each,
//! under `generated/schemas/`.)

use std::collections::BTreeMap;

use rmcp::model::ListToolsResult;
use serde_json::Value;
use server::permissions::PermissionState;
use tool_api::Platform;

fn listing(connector: &str, state: &PermissionState) -> ListToolsResult {
    let served = server::app::served_tools().unwrap();
    let published: Vec<&str> = state.published(connector).map(|t| t.name).collect();
    ListToolsResult::with_all_items(
        served
            .into_iter()
            .filter(|t| t.spec.connector == connector && !t.spec.upstream)
            .filter(|t| published.contains(&t.spec.name))
            .map(|t| t.tool)
            .collect(),
    )
}

/// Where a connector's listing is widest: Windows (where the most permissions can be had),
/// unless the connector is not published there.
fn widest_platform(connector: &tool_api::ConnectorSpec) -> Platform {
    if connector.platforms.contains(&Platform::Windows) {
        Platform::Windows
    } else {
        Platform::Linux
    }
}

fn all_on() -> BTreeMap<&'static str, bool> {
    generated::PERMISSIONS
        .iter()
        .map(|p| (p.name, true))
        .collect()
}

#[test]
fn served_schemas_are_the_generated_ones() {
    for t in server::app::served_tools().unwrap() {
        let input: Value = serde_json::from_str(t.spec.input_schema).unwrap();
        assert_eq!(Value::Object((*t.tool.input_schema).clone()), input);
        let output: Option<Value> = t
            .spec
            .output_schema
            .map(|o| serde_json::from_str(o).unwrap());
        assert_eq!(
            t.tool.output_schema.map(|o| Value::Object((*o).clone())),
            output
        );
    }
}

#[test]
fn tools_list_per_connector_is_snapshotted() {
    // Everything on where the listing is widest.
    for c in generated::CONNECTORS {
        let state = PermissionState::new(widest_platform(c), false, all_on());
        // Schemas are held by their own goldens; here only what tools/list adds around them.
        insta::assert_json_snapshot!(format!("tools_list_{}", c.name), listing(c.name, &state), {
            ".tools[].inputSchema" => "[generated/schemas/<tool>.input.json]",
            ".tools[].outputSchema" => "[generated/schemas/<tool>.output.json]",
        });
    }
}

/// With everything on, turning one permission off removes exactly the tools that need it
/// (by `requires`, or every operation they have), and adds only tools that hide while it is on
/// (`unpublished_when`).
#[test]
fn each_permission_off_removes_exactly_its_tools() {
    for c in generated::CONNECTORS {
        let platform = widest_platform(c);
        let names = |state: &PermissionState| -> std::collections::BTreeSet<&'static str> {
            state.published(c.name).map(|t| t.name).collect()
        };
        let all = names(&PermissionState::new(platform, false, all_on()));
        for p in generated::PERMISSIONS {
            let mut stored = all_on();
            stored.insert(p.name, false);
            let without = names(&PermissionState::new(platform, false, stored));
            let needs = |t: &tool_api::ToolSpec| {
                t.requires.contains(&p.name)
                    || (!t.operations.is_empty()
                        && t.operations.iter().all(|o| o.requires == p.name))
            };
            let expected: std::collections::BTreeSet<&str> = generated::TOOLS
                .iter()
                .filter(|t| all.contains(t.name) && t.connector == c.name && needs(t))
                .map(|t| t.name)
                .collect();
            let removed: std::collections::BTreeSet<&str> =
                all.difference(&without).copied().collect();
            assert_eq!(removed, expected, "{}: `{}` off", c.name, p.name);
            for added in without.difference(&all) {
                let spec = generated::TOOLS
                    .iter()
                    .find(|t| t.name == *added && t.connector == c.name)
                    .unwrap();
                assert!(
                    spec.unpublished_when.contains(&p.name),
                    "{}: `{}` off lists {added}",
                    c.name,
                    p.name
                );
            }
        }
    }
}

#[test]
fn every_connector_stays_within_its_discovery_budget() {
    for c in generated::CONNECTORS {
        // Every combination of the permissions this connector's tools depend on.
        let mut perms: Vec<&str> = generated::TOOLS
            .iter()
            .filter(|t| t.connector == c.name)
            .flat_map(|t| {
                t.requires
                    .iter()
                    .chain(t.unpublished_when)
                    .copied()
                    .chain(t.operations.iter().map(|o| o.requires))
            })
            .collect();
        perms.sort_unstable();
        perms.dedup();
        let mut worst = (0usize, Vec::new());
        for mask in 0u32..(1 << perms.len()) {
            let mut stored = all_on();
            for (i, p) in perms.iter().enumerate() {
                stored.insert(p, mask & (1 << i) != 0);
            }
            let state = PermissionState::new(widest_platform(c), false, stored);
            let list = listing(c.name, &state);
            let bytes = serde_json::to_vec(&list).unwrap().len();
            if bytes > worst.0 {
                worst = (
                    bytes,
                    list.tools.iter().map(|t| t.name.to_string()).collect(),
                );
            }
        }
        assert!(
            worst.0 <= c.discovery_budget,
            "connector `{}`: tools/list can take {} bytes ({:?}), over its budget of {}",
            c.name,
            worst.0,
            worst.1,
            c.discovery_budget
        );
        eprintln!(
            "{}: worst tools/list {} of {} bytes",
            c.name, worst.0, c.discovery_budget
        );
    }
}

/// Progressive disclosure's first request against the full one, per connector, everything on
/// (what a fresh config lists where every permission can be had): the bytes the first
/// tools/list of a stdio connection saves.
#[test]
fn a_progressive_first_listing_is_smaller_than_the_full_one() {
    for c in generated::CONNECTORS
        .iter()
        .filter(|c| !c.first_tools.is_empty())
    {
        let state = PermissionState::new(widest_platform(c), false, all_on());
        let full = listing(c.name, &state);
        let mut first = full.clone();
        first
            .tools
            .retain(|t| c.first_tools.contains(&t.name.as_ref()));
        let (full_bytes, first_bytes) = (
            serde_json::to_vec(&full).unwrap().len(),
            serde_json::to_vec(&first).unwrap().len(),
        );
        assert!(
            !first.tools.is_empty(),
            "{}: no first tool is listed",
            c.name
        );
        assert!(first_bytes < full_bytes, "{}", c.name);
        eprintln!(
            "{}: first tools/list {first_bytes} bytes ({}), full {full_bytes} bytes: {:.1}% less",
            c.name,
            first
                .tools
                .iter()
                .map(|t| t.name.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            100.0 * (1.0 - first_bytes as f64 / full_bytes as f64)
        );
    }
}

/// Drops what schemars adds that carries no constraint (`$schema`, titles, integer formats)
/// and its spelling of optional values (`type: [T, "null"]`).
fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            // `Option<Enum>` derives as `anyOf: [enum, null]`; the field's own keys win.
            if let Some(Value::Array(alternatives)) = map.get("anyOf").cloned() {
                let non_null: Vec<&Value> = alternatives
                    .iter()
                    .filter(|a| a.get("type") != Some(&Value::from("null")))
                    .collect();
                if let [Value::Object(inner)] = non_null.as_slice() {
                    map.remove("anyOf");
                    for (k, value) in inner {
                        map.entry(k.clone()).or_insert_with(|| value.clone());
                    }
                }
            }
            map.remove("$schema");
            map.remove("title");
            // A tool without arguments: `properties: {}` served, none derived.
            if map
                .get("properties")
                .is_some_and(|p| p.as_object().is_some_and(|o| o.is_empty()))
            {
                map.remove("properties");
            }
            map.remove("format");
            if let Some(Value::Array(types)) = map.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if kept.len() == 1 {
                    map.insert("type".into(), kept[0].clone());
                }
            }
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|x| !x.is_null());
            }
            for value in map.values_mut() {
                normalize(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

#[test]
fn served_input_schemas_equal_what_the_argument_types_derive() {
    // An upstream tool has no arguments of its own: its calls carry the upstream's.
    for spec in generated::TOOLS.iter().filter(|t| !t.upstream) {
        let derived = generated::derived_input_schema(spec.connector, spec.name);
        let mut derived = serde_json::to_value(derived.unwrap()).unwrap();
        // The struct's doc comment ("Arguments of `read`.") is for Rust readers; the tool's
        // description already says it to the model.
        derived.as_object_mut().unwrap().remove("description");
        let mut served: Value = serde_json::from_str(spec.input_schema).unwrap();
        normalize(&mut derived);
        normalize(&mut served);
        assert_eq!(derived, served, "tool `{}`", spec.name);
    }
}

#[test]
fn names_and_shapes_follow_chatgpt_rules() {
    for t in server::app::served_tools().unwrap() {
        let name = t.tool.name.to_string();
        assert!(
            name.len() <= 64
                && name.chars().all(|c| c.is_ascii_alphanumeric()
                    || c == '_'
                    || c == '-'
                    // Seed 002's dotted names, on the connector that keeps them (claude.ai
                    // refuses them; the README says so).
                    || (c == '.' && t.spec.connector == generated::shell::NAME)),
            "{name}"
        );
        let schema = Value::Object((*t.tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{name}");
        for kw in ["anyOf", "oneOf", "allOf", "$ref", "prefixItems"] {
            assert!(
                !schema.to_string().contains(&format!("\"{kw}\"")),
                "{name} uses {kw}"
            );
        }
        fn arrays_have_items(v: &Value, at: &str) {
            if let Value::Object(m) = v {
                if m.get("type") == Some(&Value::from("array")) {
                    assert!(
                        m.get("items").is_some_and(Value::is_object),
                        "{at}: array without items"
                    );
                }
                for (k, child) in m {
                    arrays_have_items(child, &format!("{at}.{k}"));
                }
            }
        }
        arrays_have_items(&schema, &name);
    }
}

/// The compiled surface cannot drift from surface.toml: a server built from an edited copy
/// (`GANTRY_SURFACE`, into a target directory of its own) serves the edit, and the build writes
/// nothing outside `target/`.
#[tokio::test]
async fn a_build_serves_exactly_the_surface_file_it_was_built_from() {
    let root = crate::support::workspace("");
    let work = root.join("target/surface-drift");
    std::fs::create_dir_all(&work).unwrap();
    let original = std::fs::read_to_string(root.join("surface.toml")).unwrap();
    let marker = "Edited in a copy of surface.toml by the drift test.";
    let edited = original.replacen(
        "\nRead files, directories",
        &format!("\n{marker} Read files, directories"),
        1,
    );
    assert_ne!(
        edited, original,
        "the edit must change the read tool's description"
    );
    let copy = work.join("surface.toml");
    // Rewritten only when it changes, so a second run reuses the build.
    if std::fs::read_to_string(&copy).ok().as_deref() != Some(edited.as_str()) {
        std::fs::write(&copy, &edited).unwrap();
    }

    // Every file outside target/ (and .git/), with its size and modification time.
    fn files(
        dir: &std::path::Path,
        out: &mut BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)>,
    ) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let (path, ty) = (e.path(), e.file_type().unwrap());
            if ty.is_dir() {
                if e.file_name() != "target" && e.file_name() != ".git" {
                    files(&path, out);
                }
            } else {
                let m = e.metadata().unwrap();
                out.insert(path, (m.len(), m.modified().unwrap()));
            }
        }
    }
    let tree = || {
        let mut out = BTreeMap::new();
        files(&root, &mut out);
        out
    };
    let before = tree();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = tokio::process::Command::new(cargo)
        .args(["build", "-q", "--locked", "-p", "gantry", "--bin", "gantry"])
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", work.join("target"))
        .env("GANTRY_SURFACE", &copy)
        .status()
        .await
        .unwrap();
    assert!(built.success(), "building from the edited copy failed");
    assert_eq!(tree(), before, "the build changed files outside target/");

    let sb = crate::support::Sandbox::new();
    let binary = work.join("target/debug/gantry");
    let client = sb.stdio_of(&binary, &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let read = tools.iter().find(|t| t.name == "read").unwrap();
    assert!(
        read.description
            .as_deref()
            .unwrap_or("")
            .starts_with(marker),
        "{:?}",
        read.description
    );
    client.cancel().await.unwrap();
    // The normal build still serves the real file.
    let client = sb.stdio(&[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let read = tools.iter().find(|t| t.name == "read").unwrap();
    assert!(!read.description.as_deref().unwrap_or("").contains(marker));
    client.cancel().await.unwrap();
}
