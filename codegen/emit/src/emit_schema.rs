//! JSON Schemas of tool inputs and outputs, in the subset ChatGPT accepts.
//!
//! Inputs are closed (`additionalProperties: false`) at every level so a misspelt argument is
//! an error, not a silently ignored value. Outputs stay open so a field added later does not
//! break a client that validates `structuredContent`; they carry no descriptions, because
//! every byte of tools/list counts against the connector's discovery budget and the model
//! learns what a result means from the tool's description. Object types are inlined: no `$ref`.

use serde_json::{Map, Value, json};

use surface::{Field, FieldType, ItemType, Surface, Tool};

/// Whether a schema describes what the model sends or what gantry returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Arguments: closed objects.
    Input,
    /// Results: open objects.
    Output,
}

/// The input schema of `tool`.
pub fn input_schema(surface: &Surface, tool: &Tool) -> Value {
    object_schema(surface, &tool.input, None, Role::Input)
}

/// The output schema of `tool`, or `None` when it declares no output.
pub fn output_schema(surface: &Surface, tool: &Tool) -> Option<Value> {
    (!tool.output.is_empty()).then(|| object_schema(surface, &tool.output, None, Role::Output))
}

fn object_schema(
    surface: &Surface,
    fields: &[Field],
    description: Option<&str>,
    role: Role,
) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), json!("object"));
    if let Some(d) = description {
        obj.insert("description".into(), json!(d));
    }
    let properties: Map<String, Value> = fields
        .iter()
        .map(|f| (f.name.clone(), field_schema(surface, f, role)))
        .collect();
    obj.insert("properties".into(), Value::Object(properties));
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name.as_str())
        .collect();
    if !required.is_empty() {
        obj.insert("required".into(), json!(required));
    }
    if role == Role::Input {
        obj.insert("additionalProperties".into(), json!(false));
    }
    Value::Object(obj)
}

fn named_object(surface: &Surface, name: &str, description: Option<&str>, role: Role) -> Value {
    match surface.object_type(name) {
        Some(t) if role == Role::Input => object_schema(
            surface,
            &t.fields,
            description.or(Some(&t.description)),
            role,
        ),
        Some(t) => object_schema(surface, &t.fields, None, role),
        None => json!({ "type": "object" }),
    }
}

fn field_schema(surface: &Surface, f: &Field, role: Role) -> Value {
    if let FieldType::Object(name) = &f.ty {
        let description = if role == Role::Input {
            f.description.as_deref()
        } else {
            None
        };
        return named_object(surface, name, description, role);
    }
    let mut obj = Map::new();
    let ty = match f.ty {
        FieldType::String => "string",
        FieldType::Integer => "integer",
        FieldType::Boolean => "boolean",
        FieldType::Map => "object",
        FieldType::Array(_) => "array",
        FieldType::Object(_) => "object",
    };
    obj.insert("type".into(), json!(ty));
    if let Some(d) = &f.description
        && role == Role::Input
    {
        obj.insert("description".into(), json!(d));
    }
    if let Some(e) = &f.enum_values {
        obj.insert("enum".into(), json!(e));
    }
    let b = &f.bounds;
    let bounds = [
        ("minimum", b.minimum.map(Value::from)),
        ("maximum", b.maximum.map(Value::from)),
        ("minLength", b.min_length.map(Value::from)),
        ("maxLength", b.max_length.map(Value::from)),
        ("minItems", b.min_items.map(Value::from)),
        ("maxItems", b.max_items.map(Value::from)),
    ];
    for (key, value) in bounds {
        if let Some(v) = value {
            obj.insert(key.into(), v);
        }
    }
    if let Some(d) = &f.default {
        obj.insert("default".into(), d.clone());
    }
    match &f.ty {
        FieldType::Map => {
            obj.insert("additionalProperties".into(), json!({ "type": "string" }));
        }
        FieldType::Array(item) => {
            let items = match item {
                ItemType::String => json!({ "type": "string" }),
                ItemType::Integer => json!({ "type": "integer" }),
                ItemType::Object(name) => named_object(surface, name, None, role),
            };
            obj.insert("items".into(), items);
        }
        _ => {}
    }
    Value::Object(obj)
}

/// Pretty JSON with a trailing newline, as served and kept in the goldens.
pub fn to_file(value: &Value) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}
