//! The published surface: snapshots of every schema and tools/list, discovery budgets, and
//! parity between the served schemas and what the decoders accept.

use std::collections::BTreeMap;

use gantry::permissions::PermissionState;
use rmcp::model::ListToolsResult;
use serde_json::Value;
use tool_api::Platform;

fn listing(connector: &str, state: &PermissionState) -> ListToolsResult {
    let served = gantry::app::served_tools().unwrap();
    let published: Vec<&str> = state.published(connector).map(|t| t.name).collect();
    ListToolsResult::with_all_items(
        served
            .into_iter()
            .filter(|t| published.contains(&t.spec.name))
            .map(|t| t.tool)
            .collect(),
    )
}

fn all_on() -> BTreeMap<&'static str, bool> {
    generated::PERMISSIONS
        .iter()
        .map(|p| (p.name, true))
        .collect()
}

#[test]
fn every_served_schema_is_snapshotted() {
    for t in gantry::app::served_tools().unwrap() {
        insta::assert_json_snapshot!(format!("schema_{}_input", t.spec.name), t.tool.input_schema);
        if let Some(out) = &t.tool.output_schema {
            insta::assert_json_snapshot!(format!("schema_{}_output", t.spec.name), out);
        }
    }
}

#[test]
fn tools_list_per_connector_is_snapshotted() {
    // Windows with everything on: the widest listing of each connector.
    let state = PermissionState::new(Platform::Windows, false, all_on());
    for c in generated::CONNECTORS {
        insta::assert_json_snapshot!(format!("tools_list_{}", c.name), listing(c.name, &state));
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
            let state = PermissionState::new(Platform::Windows, false, stored);
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
    for spec in generated::TOOLS {
        let derived = match spec.connector {
            "core" => generated::core::derived_input_schema(spec.name),
            "desktop" => generated::desktop::derived_input_schema(spec.name),
            other => panic!("connector {other} missing from this test"),
        };
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
    for t in gantry::app::served_tools().unwrap() {
        let name = t.tool.name.to_string();
        assert!(
            name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
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
