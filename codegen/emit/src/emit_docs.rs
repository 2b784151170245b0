//! `TOOLS.md`: the public tool reference, written from the same model as the
//! served schemas so the two cannot disagree.

use std::fmt::Write as _;

use crate::emit_cedar::{operation_action, permission_group};
use surface::{Field, FieldType, ItemType, Platform, Status, Surface, Tool};

fn platforms(list: &[Platform]) -> String {
    list.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}

fn field_type(f: &Field) -> String {
    let base = match &f.ty {
        FieldType::String => "string".to_string(),
        FieldType::Integer => "integer".to_string(),
        FieldType::Boolean => "boolean".to_string(),
        FieldType::Map => "map of string".to_string(),
        FieldType::Array(ItemType::String) => "array of string".to_string(),
        FieldType::Array(ItemType::Integer) => "array of integer".to_string(),
        FieldType::Array(ItemType::Object(t)) => format!("array of [`{t}`](#{})", t.to_lowercase()),
        FieldType::Object(t) => format!("[`{t}`](#{})", t.to_lowercase()),
    };
    match &f.enum_values {
        Some(values) => format!(
            "{base}: {}",
            values
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(" \\| ")
        ),
        None => base,
    }
}

fn field_notes(f: &Field) -> String {
    let mut notes = Vec::new();
    let b = &f.bounds;
    if let Some(v) = b.minimum {
        notes.push(format!("≥ {v}"));
    }
    if let Some(v) = b.maximum {
        notes.push(format!("≤ {v}"));
    }
    if let Some(v) = b.min_length {
        notes.push(format!("≥ {v} chars"));
    }
    if let Some(v) = b.max_length {
        notes.push(format!("≤ {v} chars"));
    }
    if let Some(v) = b.min_items {
        notes.push(format!("≥ {v} items"));
    }
    if let Some(v) = b.max_items {
        notes.push(format!("≤ {v} items"));
    }
    if let Some(d) = &f.default {
        notes.push(format!("default `{d}`"));
    }
    notes.join(", ")
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn fields_table(w: &mut String, fields: &[Field]) {
    let _ = writeln!(w, "| Field | Type | Required | Bounds | Description |");
    let _ = writeln!(w, "| --- | --- | --- | --- | --- |");
    for f in fields {
        let _ = writeln!(
            w,
            "| `{}` | {} | {} | {} | {} |",
            f.name,
            field_type(f),
            if f.required { "yes" } else { "no" },
            field_notes(f),
            cell(f.description.as_deref().unwrap_or("")),
        );
    }
}

fn tool_section(w: &mut String, t: &Tool) {
    let _ = writeln!(w, "### `{}`", t.name);
    let _ = writeln!(w);
    if t.status == Status::Planned {
        let _ = writeln!(
            w,
            "> **Not implemented yet.** The tool is declared and authorized, and its handler answers \
             `NOT_IMPLEMENTED`."
        );
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "**{}.** {}", t.title, t.description.replace('\n', " "));
    let _ = writeln!(w);
    if t.upstream {
        let _ = writeln!(
            w,
            "> **Never listed itself.** The connector lists the tools of the upstream MCP servers the \
             config names in its place, with their own schemas; a call of one is allowed by this \
             tool's action on `Host`, then decided on its `Upstream` resource."
        );
        let _ = writeln!(w);
    }
    if let Some(relayed) = &t.relays {
        let _ = writeln!(
            w,
            "> **Relayed.** Carried as `{relayed}` to the machine its own inputs name, once allowed \
             here on that machine's resource; that machine's gantry decides it again and answers."
        );
        let _ = writeln!(w);
    }
    let needs = if t.requires.is_empty() {
        "none for the call itself; see operations".to_string()
    } else {
        t.requires
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(w, "- Permissions: {needs}");
    if !t.unpublished_when.is_empty() {
        let hide = t
            .unpublished_when
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            w,
            "- Not published while {hide} is on (the handler still checks live permissions)"
        );
    }
    let a = &t.annotations;
    let _ = writeln!(
        w,
        "- Annotations: readOnlyHint `{}`, destructiveHint `{}`, idempotentHint `{}`, openWorldHint `{}`",
        a.read_only, a.destructive, a.idempotent, a.open_world
    );
    let mut resources = vec!["Host".to_string()];
    resources.extend(t.targets.iter().cloned());
    let _ = writeln!(w, "- Cedar: action `{}` on {}", t.id, resources.join(", "));
    let _ = writeln!(w, "- Platforms: {}", platforms(&t.platforms));
    if !t.limits.is_empty() {
        let limits = t
            .limits
            .iter()
            .map(|(k, v)| format!("`{k}` = {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(w, "- Limits: {limits}");
    }
    for g in &t.exactly_one_of {
        let _ = writeln!(
            w,
            "- Exactly one of: {}",
            g.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for g in &t.at_least_one_of {
        let _ = writeln!(
            w,
            "- At least one of: {}",
            g.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(w);
    if !t.operations.is_empty() {
        let _ = writeln!(w, "Operations, each authorized on its own:");
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "| Operation | Cedar action | Permission | What it does |"
        );
        let _ = writeln!(w, "| --- | --- | --- | --- |");
        for op in &t.operations {
            let _ = writeln!(
                w,
                "| `{}` | `{}` | `{}` | {} |",
                op.name,
                operation_action(&t.id, &op.name),
                op.requires,
                cell(&op.description)
            );
        }
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "Input:");
    let _ = writeln!(w);
    if t.input.is_empty() {
        let _ = writeln!(w, "_No arguments._");
    } else {
        fields_table(w, &t.input);
    }
    let _ = writeln!(w);
    if !t.output.is_empty() {
        let _ = writeln!(
            w,
            "{}",
            match t.reply {
                surface::ReplyShape::Structured =>
                    "Output (`structuredContent`, with a text rendering):",
                surface::ReplyShape::Text =>
                    "Result facts (`_meta[\"gantry/result\"]`, for programs; the model reads the text rendering once):",
            }
        );
        let _ = writeln!(w);
        fields_table(w, &t.output);
        let _ = writeln!(w);
    }
}

/// Renders `TOOLS.md`.
pub fn tools_md(surface: &Surface) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "<!-- @generated from surface.toml. Do not edit. -->");
    let _ = writeln!(w);
    let _ = writeln!(w, "# gantry tool reference");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Every tool gantry can publish, generated from `surface.toml`. What a client actually sees \
         depends on the platform and on the live permissions: a tool is listed when its connector \
         runs on this platform and every permission it needs is on, and every call is decided again \
         by the Cedar policies in `policies/`, whatever was listed."
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "## Connectors");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "| Connector | Platforms | Tools | Discovery budget | About |"
    );
    let _ = writeln!(w, "| --- | --- | --- | --- | --- |");
    for c in &surface.connectors {
        let tools = surface
            .tools_of(&c.name)
            .map(|t| {
                if c.first_tools.contains(&t.name) {
                    format!("`{}`*", t.name)
                } else {
                    format!("`{}`", t.name)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            w,
            "| `{}` ({}) | {} | {} | {} bytes | {} |",
            c.name,
            c.title,
            platforms(&c.platforms),
            tools,
            c.discovery_budget,
            cell(&c.description)
        );
    }
    if surface.connectors.iter().any(|c| !c.first_tools.is_empty()) {
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "`*`: the first tools a stdio connection set to progressive disclosure lists; the others are added after its first successful call."
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "## Permissions");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Read-only mode masks every permission marked as mutating, without changing the stored choice."
    );
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "| Permission | Cedar group | Mutates | Fresh default (windows / macos / linux) | Platforms | Allows |"
    );
    let _ = writeln!(w, "| --- | --- | --- | --- | --- | --- |");
    for p in &surface.permissions {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let _ = writeln!(
            w,
            "| `{}` | `{}` | {} | {} / {} / {} | {} | {} |",
            p.name,
            permission_group(&p.name),
            if p.mutates { "yes" } else { "no" },
            onoff(p.default[0]),
            onoff(p.default[1]),
            onoff(p.default[2]),
            platforms(&p.platforms),
            cell(&p.description)
        );
    }
    let _ = writeln!(w);
    for c in &surface.connectors {
        let _ = writeln!(w, "## {} tools", c.title);
        let _ = writeln!(w);
        for t in surface.tools_of(&c.name) {
            tool_section(w, t);
        }
    }
    let _ = writeln!(w, "## Object types");
    let _ = writeln!(w);
    for t in &surface.types {
        let _ = writeln!(w, "### {}", t.name);
        let _ = writeln!(w);
        let _ = writeln!(w, "{}", t.description);
        let _ = writeln!(w);
        fields_table(w, &t.fields);
        let _ = writeln!(w);
    }
    if !surface.errors.is_empty() {
        let _ = writeln!(w, "## Error codes");
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "A failed call is an error result (`isError: true`) whose text starts with one of these \
             codes. A refusal carries a denial code; a policy picks one with `@code(\"...\")`."
        );
        let _ = writeln!(w);
        let _ = writeln!(w, "| Code | Denial | Means |");
        let _ = writeln!(w, "| --- | --- | --- |");
        for e in &surface.errors {
            let denial = if e.denial { "yes" } else { "" };
            let _ = writeln!(
                w,
                "| `{}` | {} | {} |",
                e.code,
                denial,
                cell(&e.description)
            );
        }
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "## Cedar resources");
    let _ = writeln!(w);
    let _ = writeln!(w, "| Entity type | Attributes | Stands for |");
    let _ = writeln!(w, "| --- | --- | --- |");
    let _ = writeln!(
        w,
        "| `Connector` | | The principal: the connector endpoint a call arrived on. |"
    );
    let _ = writeln!(w, "| `Host` | | The computer as a whole. |");
    for r in &surface.resources {
        let attrs = r
            .attributes
            .iter()
            .map(|(n, t)| format!("`{n}: {}`", t.cedar_name()))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(w, "| `{}` | {} | {} |", r.name, attrs, cell(&r.description));
    }
    // Markdown renderers treat a trailing blank line as noise; end with exactly one newline.
    while s.ends_with("\n\n") {
        s.pop();
    }
    s
}
