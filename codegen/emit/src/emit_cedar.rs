//! The Cedar schema of the surface: entity types, the request context, and one action per
//! tool and per tool operation, grouped by connector and by permission.
//!
//! Groups are actions too, so policies can say `action in Action::"permission:exec"` or
//! `action in Action::"mutating"` and stay correct when a tool is added.

use std::fmt::Write as _;

use surface::Surface;

/// Name of the action group every mutating permission's group belongs to.
pub const MUTATING_GROUP: &str = "mutating";

/// The Cedar action id of a tool operation.
pub fn operation_action(tool: &str, op: &str) -> String {
    format!("{tool}:{op}")
}

/// The Cedar action group of a permission.
pub fn permission_group(permission: &str) -> String {
    format!("permission:{permission}")
}

/// The Cedar action group of a connector.
pub fn connector_group(connector: &str) -> String {
    format!("connector:{connector}")
}

/// Renders `surface.cedarschema`.
pub fn schema(surface: &Surface) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "// @generated from surface.toml. Do not edit.");
    let _ = writeln!(w, "//");
    let _ = writeln!(
        w,
        "// Who calls (Connector), what a call touches (Host and the declared resources), the"
    );
    let _ = writeln!(
        w,
        "// live permission snapshot every request carries, and one action per tool and per tool"
    );
    let _ = writeln!(
        w,
        "// operation. Policies in policies/*.cedar are validated strictly against this file."
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "// The connector endpoint the call arrived on.");
    let _ = writeln!(w, "entity Connector;");
    if surface.connectors.iter().any(|c| c.workers) {
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "// A run of worker agents, started by the `agents` tool of the connector it is in."
        );
        let _ = writeln!(w, "entity Run in [Connector];");
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "// One worker agent of a run. It calls on an endpoint and secret of its own, so its"
        );
        let _ = writeln!(
            w,
            "// identity is proven by where the call arrives, never taken from arguments."
        );
        let _ = writeln!(w, "entity Worker in [Run];");
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "// The computer as a whole: the resource of a call before it names a target."
    );
    let _ = writeln!(w, "entity Host;");
    for r in &surface.resources {
        let _ = writeln!(w);
        let _ = writeln!(w, "// {}", r.description);
        if r.attributes.is_empty() {
            let _ = writeln!(w, "entity {};", r.name);
        } else {
            let _ = writeln!(w, "entity {} = {{", r.name);
            for (name, ty) in &r.attributes {
                let _ = writeln!(w, "  {name}: {},", ty.cedar_name());
            }
            let _ = writeln!(w, "}};");
        }
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "// Every permission as the user set it, masked off where this platform cannot have it."
    );
    let _ = writeln!(
        w,
        "// Read-only mode masks the mutating ones here too, and a base policy refuses them."
    );
    let _ = writeln!(w, "type Permissions = {{");
    for p in &surface.permissions {
        let _ = writeln!(w, "  {}: Bool,", p.name);
    }
    let _ = writeln!(w, "}};");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "// The facts every request carries besides principal, action and resource."
    );
    let _ = writeln!(w, "type Snapshot = {{");
    let _ = writeln!(w, "  platform: String,");
    let _ = writeln!(w, "  read_only: Bool,");
    let _ = writeln!(w, "  permissions: Permissions,");
    let _ = writeln!(w, "}};");
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "// Action groups: one per connector, one per permission, and one for everything that"
    );
    let _ = writeln!(
        w,
        "// changes state (the permission groups whose permission mutates)."
    );
    for c in &surface.connectors {
        let _ = writeln!(w, "action \"{}\";", connector_group(&c.name));
    }
    let _ = writeln!(w, "action \"{MUTATING_GROUP}\";");
    for p in &surface.permissions {
        if p.mutates {
            let _ = writeln!(
                w,
                "action \"{}\" in [\"{MUTATING_GROUP}\"];",
                permission_group(&p.name)
            );
        } else {
            let _ = writeln!(w, "action \"{}\";", permission_group(&p.name));
        }
    }
    for t in &surface.tools {
        let _ = writeln!(w);
        if t.name == t.id {
            let _ = writeln!(w, "// Tool `{}` ({}).", t.name, t.title);
        } else {
            let _ = writeln!(
                w,
                "// Tool `{}` of connector `{}` ({}).",
                t.name, t.connector, t.title
            );
        }
        let mut groups = vec![connector_group(&t.connector)];
        groups.extend(t.requires.iter().map(|p| permission_group(p)));
        // What a relayed tool changes on the other machine is a change all the same:
        // read-only mode here stops it before it leaves.
        if t.relays.is_some() && !t.annotations.read_only {
            groups.push(MUTATING_GROUP.to_string());
        }
        let mut resources = vec!["Host".to_string()];
        resources.extend(t.targets.iter().cloned());
        let workers = surface
            .connectors
            .iter()
            .any(|c| c.name == t.connector && c.workers);
        let principals: &[&str] = if workers {
            &["Connector", "Worker"]
        } else {
            &["Connector"]
        };
        action(w, &t.id, &groups, principals, &resources);
        for op in &t.operations {
            let groups = vec![
                connector_group(&t.connector),
                permission_group(&op.requires),
            ];
            // An operation may act on the computer as a whole too (a desktop step on the
            // clipboard, a wait), so it applies wherever its tool does.
            action(
                w,
                &operation_action(&t.id, &op.name),
                &groups,
                principals,
                &resources,
            );
        }
    }
    s
}

fn action(
    w: &mut String,
    name: &str,
    groups: &[String],
    principals: &[&str],
    resources: &[String],
) {
    let groups = groups
        .iter()
        .map(|g| format!("\"{g}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(w, "action \"{name}\" in [{groups}] appliesTo {{");
    let _ = writeln!(w, "  principal: [{}],", principals.join(", "));
    let _ = writeln!(w, "  resource: [{}],", resources.join(", "));
    let _ = writeln!(w, "  context: Snapshot,");
    let _ = writeln!(w, "}};");
}

/// Renders `base.cedar`: the policies every policy set starts with, derived from the surface so
/// that no user policy file can drop them. Each connector reaches only its own tools (a permit,
/// and a forbid that no user permit can outweigh; `in` takes in the workers of a connector
/// that has them), each permission gates its group, and read-only mode refuses everything
/// that mutates.
pub fn base_policies(surface: &Surface) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "// @generated from surface.toml. Do not edit.");
    let _ = writeln!(w, "//");
    let _ = writeln!(
        w,
        "// The base of every policy set, always loaded: user policies (policies/*.cedar or"
    );
    let _ = writeln!(
        w,
        "// --policies DIR) can narrow what it allows and never open what it forbids."
    );
    for c in &surface.connectors {
        let group = connector_group(&c.name);
        let _ = writeln!(w);
        let _ = writeln!(w, "@id(\"connector.{}\")", c.name);
        let _ = writeln!(
            w,
            "permit (principal in Connector::\"{}\", action in Action::\"{group}\", resource);",
            c.name
        );
        let _ = writeln!(w);
        let _ = writeln!(w, "@id(\"connector_scope.{}\")", c.name);
        let _ = writeln!(
            w,
            "@reason(\"the tool belongs to connector `{}`, not to the one the call arrived on\")",
            c.name
        );
        let _ = writeln!(
            w,
            "forbid (principal, action in Action::\"{group}\", resource)\nunless {{ principal in Connector::\"{}\" }};",
            c.name
        );
    }
    // A permission no tool needs (one policies read from the context, such as `kill_any`)
    // gates no action.
    let needed = |p: &str| {
        surface
            .tools
            .iter()
            .any(|t| t.all_permissions().contains(&p))
    };
    for p in surface.permissions.iter().filter(|p| needed(&p.name)) {
        let _ = writeln!(w);
        let _ = writeln!(w, "@id(\"permission.{}\")", p.name);
        let _ = writeln!(w, "@reason(\"the `{}` permission is off\")", p.name);
        let _ = writeln!(
            w,
            "forbid (principal, action in Action::\"{}\", resource)\nunless {{ context.permissions.{} }};",
            permission_group(&p.name),
            p.name
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "@id(\"mode.read_only\")");
    let _ = writeln!(w, "@reason(\"read-only mode is on\")");
    let _ = writeln!(
        w,
        "forbid (principal, action in Action::\"{MUTATING_GROUP}\", resource)\nwhen {{ context.read_only }};"
    );
    s
}
