use std::sync::Arc;

use super::*;
use crate::gate::Gate;
use crate::resource::Host;

const SCHEMA: &str = r#"
entity Connector;
entity Host;
entity Path = { inside_root: Bool, kind: String };
type Permissions = { read: Bool, write: Bool };
type Snapshot = { platform: String, read_only: Bool, permissions: Permissions };
action "connector:core";
action "mutating";
action "permission:read";
action "permission:write" in ["mutating"];
action "read" in ["connector:core", "permission:read"] appliesTo {
  principal: [Connector], resource: [Host, Path], context: Snapshot,
};
action "write" in ["connector:core", "permission:write"] appliesTo {
  principal: [Connector], resource: [Host, Path], context: Snapshot,
};
"#;

const POLICIES: &str = r#"
@id("connector.core")
permit (principal == Connector::"core", action in Action::"connector:core", resource);

@id("permission.read")
@reason("the `read` permission is off")
forbid (principal, action in Action::"permission:read", resource)
unless { context.permissions.read };

@id("read_only")
@reason("read-only mode is on")
forbid (principal, action in Action::"mutating", resource)
when { context.read_only };

@id("paths.inside_roots")
@code("PATH_NOT_ALLOWED")
@reason("the path is outside the approved roots")
forbid (principal, action, resource is Path)
unless { resource.inside_root };
"#;

struct TestPath {
    id: String,
    inside: bool,
}

impl Resource for TestPath {
    fn entity_type(&self) -> &'static str {
        "Path"
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn attributes(&self) -> Vec<(&'static str, AttrValue<'_>)> {
        vec![
            ("inside_root", AttrValue::Bool(self.inside)),
            ("kind", AttrValue::String("file")),
        ]
    }
}

fn engine(policies: &str) -> Result<Engine, Vec<LoadError>> {
    Engine::load(
        SCHEMA,
        &[PolicyFile {
            name: "p.cedar".into(),
            text: policies.into(),
        }],
        &["PERMISSION_DENIED", "PATH_NOT_ALLOWED"],
    )
}

fn snapshot(read: bool, write: bool, read_only: bool) -> Snapshot {
    Snapshot {
        platform: "linux",
        read_only,
        permissions: vec![("read", read), ("write", write)],
    }
}

fn gate(read: bool, write: bool, read_only: bool) -> Gate {
    let engine = Arc::new(engine(POLICIES).unwrap());
    Gate::for_snapshot(engine, "core", &snapshot(read, write, read_only)).unwrap()
}

const READ: ActionId = ActionId::new("read");
const WRITE: ActionId = ActionId::new("write");

#[test]
fn permits_when_everything_is_on() {
    let g = gate(true, true, false);
    let ok = g.authorize(READ, &Host, 7).unwrap();
    assert_eq!(*ok, 7);
    assert_eq!(ok.policies(), ["connector.core"]);
}

#[test]
fn a_permission_that_is_off_denies_naming_policy_and_reason() {
    let g = gate(false, true, false);
    let denial = g
        .authorize(READ, &Host, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert_eq!(denial.code, "PERMISSION_DENIED");
    assert_eq!(
        denial.policy.as_ref().map(|p| p.id.as_str()),
        Some("permission.read")
    );
    assert_eq!(
        denial.to_string(),
        "`read` denied: the `read` permission is off (policy `permission.read` in p.cedar)"
    );
}

#[test]
fn read_only_mode_denies_through_group_membership() {
    let g = gate(true, true, true);
    assert!(g.authorize(READ, &Host, ()).is_ok());
    let denial = g
        .authorize(WRITE, &Host, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert_eq!(
        denial.policy.as_ref().map(|p| p.id.as_str()),
        Some("read_only")
    );
}

#[test]
fn resource_facts_decide_and_carry_their_code() {
    let g = gate(true, true, false);
    let inside = TestPath {
        id: "/root/a".into(),
        inside: true,
    };
    let outside = TestPath {
        id: "/etc/shadow".into(),
        inside: false,
    };
    assert!(g.authorize(READ, &inside, ()).is_ok());
    let denial = g
        .authorize(READ, &outside, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert_eq!(denial.code, "PATH_NOT_ALLOWED");
    assert!(!denial.to_string().contains("/etc/shadow"), "{denial}");
}

#[test]
fn another_connector_gets_a_default_deny() {
    let engine = Arc::new(engine(POLICIES).unwrap());
    let g = Gate::for_snapshot(engine, "desktop", &snapshot(true, true, false)).unwrap();
    let denial = g
        .authorize(READ, &Host, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert_eq!(denial.reason, "no policy permits it");
    assert_eq!(denial.policy, None);
}

#[test]
fn unknown_action_is_a_deny_not_a_panic() {
    let g = gate(true, true, false);
    let denial = g
        .authorize(ActionId::new("nope"), &Host, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert!(denial.reason.contains("could not be evaluated"), "{denial}");
}

#[test]
fn an_evaluation_error_denies_even_when_a_permit_matches() {
    // Cedar skips a policy whose evaluation errors, so this forbid would silently vanish and
    // `connector.core` would allow; gantry treats the error itself as a deny.
    let policies = format!(
        "{POLICIES}\n@id(\"overflow\")\nforbid (principal, action, resource) when {{ 9223372036854775807 + 1 > 0 }};\n"
    );
    let engine = Arc::new(engine(&policies).unwrap());
    let g = Gate::for_snapshot(engine, "core", &snapshot(true, true, false)).unwrap();
    let denial = g
        .authorize(READ, &Host, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert!(denial.reason.contains("could not be evaluated"), "{denial}");
    assert!(denial.reason.contains("overflow"), "{denial}");
}

#[test]
fn missing_and_duplicate_ids_are_refused_with_their_place() {
    let text = "@id(\"a\")\npermit (principal, action, resource);\n\npermit (principal, action, resource);\n@id(\"a\")\nforbid (principal, action, resource);\n";
    let errors = engine(text).err().unwrap_or_default();
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].starts_with("p.cedar:4:1: policy `policy1`: every policy needs an @id"),
        "{shown:?}"
    );
    assert!(
        shown[1].starts_with("p.cedar:5:1: policy `a`: duplicate @id"),
        "{shown:?}"
    );
}

#[test]
fn strict_validation_errors_name_policy_file_and_line() {
    let text = format!(
        "{POLICIES}\n@id(\"typo\")\nforbid (principal, action, resource)\nunless {{ context.permissions.raed }};\n"
    );
    let errors = engine(&text).err().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let LoadError::Policy {
        policy, file, line, ..
    } = &errors[0]
    else {
        panic!("{errors:?}")
    };
    assert_eq!((policy.as_str(), file.as_str()), ("typo", "p.cedar"));
    let expected = text
        .lines()
        .position(|l| l.contains("raed"))
        .map(|i| i + 1)
        .unwrap_or(0);
    assert_eq!(*line, expected, "{}", errors[0]);
}

#[test]
fn parse_errors_name_file_and_line() {
    let errors = engine("@id(\"x\")\npermit (principal, action, resource)\n")
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        matches!(&errors[0], LoadError::Parse { file, .. } if file == "p.cedar"),
        "{errors:?}"
    );
}

#[test]
fn unknown_denial_codes_are_refused() {
    let errors = engine("@id(\"x\")\n@code(\"OOPS\")\nforbid (principal, action, resource);\n")
        .err()
        .unwrap_or_default();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("unknown @code `OOPS`")),
        "{errors:?}"
    );
}

#[test]
fn a_resource_the_action_does_not_apply_to_is_denied() {
    struct Other;
    impl Resource for Other {
        fn entity_type(&self) -> &'static str {
            "Connector"
        }
        fn id(&self) -> &str {
            "x"
        }
        fn attributes(&self) -> Vec<(&'static str, AttrValue<'_>)> {
            Vec::new()
        }
    }
    let g = gate(true, true, false);
    let denial = g
        .authorize(READ, &Other, ())
        .err()
        .unwrap_or_else(|| panic!("allowed"));
    assert!(
        denial.reason.contains("does not apply to a Connector"),
        "{denial}"
    );
}

#[test]
fn a_context_that_does_not_fit_the_schema_is_refused_when_the_gate_is_built() {
    let engine = Arc::new(engine(POLICIES).unwrap());
    let snapshot = Snapshot {
        platform: "linux",
        read_only: false,
        permissions: vec![("read", true)],
    };
    let denial = Gate::for_snapshot(engine, "core", &snapshot)
        .err()
        .unwrap_or_else(|| panic!("built"));
    assert!(denial.reason.contains("could not be built"), "{denial}");
}

#[test]
fn per_action_policy_subsets_decide_exactly_like_the_whole_set() {
    let engine = Arc::new(engine(POLICIES).unwrap());
    let paths = [
        TestPath {
            id: "/r/a".into(),
            inside: true,
        },
        TestPath {
            id: "/x".into(),
            inside: false,
        },
    ];
    for (read, write, ro) in [
        (true, true, false),
        (false, true, false),
        (true, false, true),
        (false, false, true),
    ] {
        for connector in ["core", "desktop"] {
            let g =
                Gate::for_snapshot(engine.clone(), connector, &snapshot(read, write, ro)).unwrap();
            for action in [READ, WRITE] {
                let mut outcomes = Vec::new();
                for full in [false, true] {
                    super::FULL_SET.with(|f| f.set(full));
                    let host = g
                        .authorize(action, &Host, ())
                        .map(|a| a.policies().to_vec())
                        .map_err(|d| d.to_string());
                    let on_paths: Vec<_> = paths
                        .iter()
                        .map(|p| {
                            g.authorize(action, p, ())
                                .map(|a| a.policies().to_vec())
                                .map_err(|d| d.to_string())
                        })
                        .collect();
                    outcomes.push((host, on_paths));
                }
                super::FULL_SET.with(|f| f.set(false));
                assert_eq!(
                    outcomes[0], outcomes[1],
                    "{connector} {action} read={read} write={write} ro={ro}"
                );
            }
        }
    }
}

/// Remembered decisions are reused only under the context, principal and resource they were
/// made for: a permission change, another connector, another path or another attribute value
/// is decided afresh, and a repeat answers exactly as the first evaluation did.
#[test]
fn remembered_decisions_never_cross_contexts_principals_or_resources() {
    let engine = Arc::new(engine(POLICIES).unwrap());
    let on = Gate::for_snapshot(engine.clone(), "core", &snapshot(true, true, false)).unwrap();
    let off = Gate::for_snapshot(engine.clone(), "core", &snapshot(false, true, false)).unwrap();
    let other = Gate::for_snapshot(engine, "desktop", &snapshot(true, true, false)).unwrap();
    for _ in 0..3 {
        assert_eq!(
            on.authorize(READ, &Host, ()).unwrap().policies(),
            ["connector.core"]
        );
        assert!(off.authorize(READ, &Host, ()).is_err());
        assert!(other.authorize(READ, &Host, ()).is_err());
        let inside = TestPath {
            id: "/r/a".into(),
            inside: true,
        };
        let outside = TestPath {
            id: "/r/a".into(),
            inside: false,
        };
        assert!(on.authorize(READ, &inside, ()).is_ok());
        let denial = on
            .authorize(READ, &outside, ())
            .err()
            .unwrap_or_else(|| panic!("allowed"));
        assert_eq!(denial.code, "PATH_NOT_ALLOWED");
    }
    // The same request under the whole policy set (never memoized) decides alike.
    FULL_SET.with(|f| f.set(true));
    let fresh = on.authorize(READ, &Host, ()).unwrap().policies().to_vec();
    FULL_SET.with(|f| f.set(false));
    assert_eq!(fresh, ["connector.core"]);
}

/// A worker reaches its connector's tools through `principal in Connector`, a policy can
/// single workers out by type or by run, and the prime is not a worker.
#[test]
fn a_worker_is_a_principal_in_its_run_and_its_connector() {
    let schema = format!(
        "{}\nentity Run in [Connector];\nentity Worker in [Run];\naction \"spawn\" in [\"connector:core\"] appliesTo {{ principal: [Connector, Worker], resource: [Host], context: Snapshot, }};\n",
        SCHEMA.replace("principal: [Connector]", "principal: [Connector, Worker]")
    );
    let policies = r#"
@id("connector.core")
permit (principal in Connector::"core", action in Action::"connector:core", resource);

@id("prime_only")
@reason("only the prime spawns")
forbid (principal is Worker, action == Action::"spawn", resource);

@id("run_b_reads_nothing")
forbid (principal in Run::"b", action == Action::"read", resource);
"#;
    let engine = Arc::new(
        Engine::load(
            &schema,
            &[PolicyFile {
                name: "p.cedar".into(),
                text: policies.into(),
            }],
            &["PERMISSION_DENIED"],
        )
        .unwrap(),
    );
    let facts = engine.facts(&snapshot(true, true, false)).unwrap();
    let worker = |run: &str| {
        Gate::for_worker(
            engine.clone(),
            "core",
            crate::gate::WorkerId {
                run: run.into(),
                worker: "w1".into(),
            },
            &facts,
        )
        .unwrap()
    };
    let prime = Gate::new(engine.clone(), "core", &facts).unwrap();
    const SPAWN: ActionId = ActionId::new("spawn");
    assert!(worker("a").authorize(READ, &Host, ()).is_ok());
    assert!(worker("b").authorize(READ, &Host, ()).is_err());
    let denied = worker("a").authorize(SPAWN, &Host, ()).err().unwrap();
    assert_eq!(denied.reason, "only the prime spawns");
    assert!(prime.authorize(SPAWN, &Host, ()).is_ok());
    assert_eq!(worker("a").owner(), "core/a/w1");
    assert_eq!(prime.owner(), "core");
}
