//! Each surface.toml feature, through the Rust the generator emitted for the fixture surface.

#![cfg(test)]

use std::time::Duration;

use serde_json::{Value, json};
use surface_fixture::{
    DeclaredErrorCode, PERMISSIONS, Permission, TOOLS, call_context, handlers, main, resources,
    side,
};
use tool_api::{ErrorCode, Platform, Resource as _};

const ALL: &[&str] = &["look", "change", "remove", "shortcut", "windows_only"];

async fn call(connector: &str, on: &[&str], tool: &str, args: Value) -> Result<Value, String> {
    let cx = call_context(connector, "linux", on)?;
    let Value::Object(args) = args else {
        return Err("arguments must be an object".into());
    };
    handlers()
        .dispatch(connector, &cx, tool, args)
        .await
        .map(|e| e.structured.unwrap_or(Value::String(e.text)))
        .map_err(|e| e.to_string())
}

fn tool(name: &str) -> &'static tool_api::ToolSpec {
    TOOLS.iter().find(|t| t.name == name).unwrap()
}

#[test]
fn limits_are_typed_constants_and_descriptions_quote_them() {
    assert_eq!(main::limits::inspect::MAX_ITEMS, 4usize);
    assert_eq!(main::limits::inspect::MAX_BYTES.get(), 2048);
    assert_eq!(main::limits::inspect::MAX_BYTES.to_string(), "2 KB");
    assert_eq!(
        main::limits::inspect::BUDGET.duration(),
        Duration::from_millis(1500)
    );
    let inspect = tool("inspect");
    assert_eq!(
        inspect.description,
        "Inspect up to 4 items, 2 KB each, within 1500 ms."
    );
    assert_eq!(
        inspect.limits,
        [
            ("max_items", "4"),
            ("max_bytes", "2 KB"),
            ("budget", "1500 ms")
        ]
    );
    let schema: Value = serde_json::from_str(inspect.input_schema).unwrap();
    assert_eq!(
        schema["properties"]["name"]["description"],
        "One item (at most 2 KB)."
    );
}

#[test]
fn permissions_and_error_codes_are_enums_in_declaration_order() {
    let names: Vec<&str> = Permission::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(names, ALL);
    assert_eq!(Permission::from_name("remove"), Some(Permission::Remove));
    assert!(Permission::Change.spec().mutates);
    assert_eq!(
        Permission::WindowsOnly.spec().platforms,
        [Platform::Windows]
    );
    assert!(!Permission::Change.spec().default.get(Platform::Linux));
    assert_eq!(PERMISSIONS.len(), Permission::ALL.len());
    assert_eq!(DeclaredErrorCode::DENIALS, ["REFUSED", "OUT_OF_BOUNDS"]);
    assert_eq!(
        DeclaredErrorCode::from_code("BAD_INPUT"),
        Some(DeclaredErrorCode::BadInput)
    );
    assert_eq!(
        DeclaredErrorCode::OutOfBounds.description(),
        "A policy refused: outside the allowed area."
    );
}

#[test]
fn connectors_tools_and_resources_keep_what_was_declared() {
    assert_eq!((main::NAME, side::NAME), ("main", "side"));
    assert_eq!(tool("poke").platforms, [Platform::Windows]);
    assert_eq!(tool("poke").output_schema, None);
    assert_eq!(tool("someday").status, tool_api::Status::Planned);
    let inspect = tool("inspect");
    assert!(inspect.published(|p| p == "look"));
    assert!(
        !inspect.published(|p| p == "look" || p == "shortcut"),
        "unpublished_when"
    );
    let change = tool("change");
    assert!(
        change.published(|p| p == "remove"),
        "any operation's permission lists it"
    );
    assert_eq!(
        change.output_schema,
        tool("undo").output_schema,
        "one shared output type"
    );
    assert_eq!(
        main::ChangeOperation::Delete.action().as_str(),
        "change:delete"
    );
    assert_eq!(main::ChangeOperation::Delete.permission(), "remove");
    // `takes`: the optional inputs an operation takes, and those a call gives.
    assert_eq!(
        main::ChangeOperation::Edit.takes(),
        Some(&["set", "clear"][..])
    );
    assert_eq!(main::ChangeOperation::Delete.takes(), None);
    let args: main::ChangeArgs =
        serde_json::from_value(serde_json::json!({ "id": "i", "clear": true })).unwrap();
    assert_eq!(args.given(), ["clear"]);
    let item = resources::Item {
        id: "i".into(),
        inside: true,
        label: "l".into(),
        size: 3,
    };
    assert_eq!(item.entity_type(), "Item");
    assert_eq!(item.attributes().len(), 3);
    assert!(surface_fixture::derived_input_schema("main", "inspect").is_some());
    assert!(surface_fixture::derived_input_schema("elsewhere", "inspect").is_none());
}

#[tokio::test]
async fn inputs_decode_with_defaults_keywords_maps_and_nested_objects() {
    let out = call(
        "main",
        ALL,
        "inspect",
        json!({
            "name": "a", "names": ["b"], "mode": "deep", "depth": 3, "verbose": true,
            "tags": {"k": "v"}, "type": "kw", "ids": [1, 2],
            "shape": { "name": "tri", "points": [{ "x": 1, "y": 2 }] }
        }),
    )
    .await
    .unwrap();
    assert_eq!(out["kind"], "some");
    assert_eq!(out["found"][1]["name"], "b");
    assert_eq!(out["found"][0]["points"][0]["x"], 1);
    let none = call("main", ALL, "inspect", json!({ "names": [] }))
        .await
        .unwrap();
    assert_eq!(none["kind"], "none");
}

#[tokio::test]
async fn every_bound_is_refused_naming_the_field() {
    let cases = [
        (json!({ "name": "a", "depth": 4 }), "depth"),
        (json!({ "name": "a", "mode": "slow" }), "mode"),
        (json!({ "name": "x".repeat(17) }), "name"),
        (json!({ "names": ["a", "b", "c", "d", "e"] }), "names"),
        (json!({ "name": "a", "type": "123456789" }), "type"),
        (
            json!({ "name": "a", "shape": { "name": "" } }),
            "shape.name",
        ),
        (
            json!({ "name": "a", "shape": { "name": "s", "points": [] } }),
            "shape.points",
        ),
        (
            json!({ "name": "a", "shape": { "name": "s", "points": [{ "x": 101, "y": 0 }] } }),
            "shape.points[0].x",
        ),
        (json!({ "name": "a", "extra": 1 }), "extra"),
        (json!({ "depth": 1 }), "name"),
    ];
    for (args, field) in cases {
        let err = call("main", ALL, "inspect", args.clone())
            .await
            .unwrap_err();
        assert!(err.starts_with("INVALID_INPUT"), "{args}: {err}");
        assert!(err.contains(field), "{args}: {err} should name {field}");
    }
    let both = call(
        "main",
        ALL,
        "change",
        json!({ "id": "i", "set": "v", "clear": true }),
    )
    .await;
    assert!(both.unwrap_err().contains("set"));
    let neither = call("main", ALL, "change", json!({ "id": "i" })).await;
    assert!(neither.unwrap_err().starts_with("INVALID_INPUT"));
}

#[tokio::test]
async fn cedar_decides_tools_operations_and_resources() {
    let off = call("main", &["change"], "inspect", json!({ "name": "a" })).await;
    assert!(off.unwrap_err().contains("`look` permission is off"));
    let edit = call(
        "main",
        &["change"],
        "change",
        json!({ "id": "i", "set": "v" }),
    )
    .await
    .unwrap();
    assert_eq!(edit["note"], "change:edit needed `change`");
    let delete = call(
        "main",
        &["change"],
        "change",
        json!({ "id": "i", "clear": true }),
    )
    .await;
    assert!(delete.unwrap_err().contains("`remove` permission is off"));
    assert!(
        call(
            "main",
            &["remove"],
            "change",
            json!({ "id": "i", "clear": true })
        )
        .await
        .is_ok()
    );
    // A policy's own code reaches authz; gantry's ErrorCode has no OUT_OF_BOUNDS, so the
    // tool error falls back to the default denial.
    let outside = call(
        "main",
        ALL,
        "change",
        json!({ "id": "outside-1", "set": "v" }),
    )
    .await;
    let outside = outside.unwrap_err();
    assert!(
        outside.starts_with(ErrorCode::PermissionDenied.as_str()),
        "{outside}"
    );
    assert!(outside.contains("outside the allowed area"), "{outside}");
    let undo = call("main", &["change"], "undo", json!({})).await.unwrap();
    assert_eq!(undo["changed"], 0);
}

#[tokio::test]
async fn planned_tools_and_other_connectors_tools_answer_with_their_codes() {
    let planned = call("main", ALL, "someday", json!({ "q": "x" }))
        .await
        .unwrap_err();
    assert!(planned.starts_with("NOT_IMPLEMENTED"), "{planned}");
    let foreign = call("main", ALL, "poke", json!({})).await.unwrap_err();
    assert!(foreign.starts_with("UNKNOWN_TOOL"), "{foreign}");
    assert_eq!(
        call("side", ALL, "poke", json!({})).await.unwrap(),
        Value::String("poked".into())
    );
}
