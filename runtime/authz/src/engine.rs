//! Loading, validating and evaluating the policy set.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Entities, Entity, EntityId, EntityTypeName, EntityUid,
    PolicyId, PolicySet, Request, RestrictedExpression, Schema, ValidationMode, Validator,
};

use crate::resource::{ActionId, AttrValue, Resource};

/// One policy file: its name for diagnostics and its text.
#[derive(Debug, Clone)]
pub struct PolicyFile {
    /// The file as the user knows it (`policies/base.cedar`).
    pub name: String,
    /// Its contents.
    pub text: String,
}

/// The permission snapshot a call is decided against. Values are already effective: platform
/// masking and read-only mode applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `windows`, `macos` or `linux`.
    pub platform: &'static str,
    /// Whether read-only mode is on.
    pub read_only: bool,
    /// Every permission of the surface and whether it is in effect.
    pub permissions: Vec<(&'static str, bool)>,
}

/// Why the policy set could not be loaded. Every variant names where to look.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The generated Cedar schema itself is broken (a codegen bug or a hand edit).
    #[error("surface.cedarschema: {reason}")]
    Schema {
        /// What Cedar said.
        reason: String,
    },
    /// A policy file does not parse.
    #[error("{file}:{line}:{column}: {reason}")]
    Parse {
        /// The policy file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        reason: String,
    },
    /// A policy parses but is refused: no `@id`, a duplicate id, or it fails strict validation.
    #[error("{file}:{line}:{column}: policy `{policy}`: {reason}")]
    Policy {
        /// The policy's `@id` (or Cedar's positional id when it has none).
        policy: String,
        /// The policy file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        reason: String,
    },
}

impl LoadError {
    /// Every problem of a failed load, one per line.
    pub fn lines(errors: &[LoadError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

struct PolicyMeta {
    file: String,
    reason: Option<String>,
    code: &'static str,
}

/// A snapshot as a validated Cedar context, ready to be shared by many calls.
#[derive(Debug, Clone)]
pub struct Facts {
    pub(crate) context: Context,
    /// Tells this context from every other one built in the process, so a remembered decision
    /// is only reused under the context it was made in.
    pub(crate) id: u64,
}

/// The next [`Facts::id`].
static FACTS_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An owned copy of a resource attribute, for the memo's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum AttrKey {
    Bool(bool),
    String(String),
    Long(i64),
}

/// Everything a decision depends on besides the policy set: the context, the principal, the
/// action and the resource's type, id and attributes. Cedar evaluates a pure function of the
/// policies and the request (it has no clock and no randomness), so equal keys under one
/// engine always decide alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MemoKey {
    facts: u64,
    principal: String,
    action: &'static str,
    resource_type: &'static str,
    resource_id: String,
    attributes: Vec<(&'static str, AttrKey)>,
}

/// How many decisions an engine remembers before it starts afresh.
const MEMO_ENTRIES: usize = 4096;
/// The largest resource (id and attribute text) whose decision is remembered.
const MEMO_KEY_BYTES: usize = 1024;

/// The outcome of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// True only for a permit with no evaluation error.
    pub allowed: bool,
    /// The ids of the policies that determined the decision.
    pub policies: Vec<String>,
    /// Evaluation errors (each one forces a deny).
    pub errors: Vec<String>,
}

/// A refused request, ready to be reported to the caller. It never contains the resource id,
/// which may be a resolved path the caller did not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The engine's default denial code (`PERMISSION_DENIED`), or the `@code` of the
    /// deciding policy (e.g. `PATH_NOT_ALLOWED`); always one of the codes it was loaded with.
    pub code: &'static str,
    /// The action that was refused.
    pub action: &'static str,
    /// The resource type it was refused on.
    pub resource_type: &'static str,
    /// The deciding policy, if one decided (a default deny has none).
    pub policy: Option<PolicyRef>,
    /// Why, in the policy author's words (`@reason`) or the engine's.
    pub reason: String,
}

/// The policy that decided a denial, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    /// Its `@id`.
    pub id: String,
    /// Its file.
    pub file: String,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` denied: {}", self.action, self.reason)?;
        if let Some(p) = &self.policy {
            write!(f, " (policy `{}` in {})", p.id, p.file)?;
        }
        Ok(())
    }
}

/// The loaded, validated policy set and everything needed to evaluate it quickly.
pub struct Engine {
    schema: Schema,
    policies: PolicySet,
    meta: HashMap<String, PolicyMeta>,
    /// Each action's entity with its ancestors already closed over (from the schema), so a
    /// request's entity store is just that action plus the resource: `action in
    /// Action::"group"` needs no other entity and no transitive-closure pass per request.
    actions: HashMap<String, (EntityUid, Entity)>,
    /// For each action, the policies whose action scope can match it. Cedar evaluates every
    /// policy it is given; a policy scoped to other actions can never apply, so leaving it
    /// out changes no decision and makes one several times faster.
    by_action: HashMap<String, PolicySet>,
    /// For each action, the resource types it applies to. Checked on every request instead of
    /// letting Cedar re-validate the whole request against the schema each time.
    resources_for: HashMap<String, HashSet<String>>,
    /// An action whose context type is the shared `Snapshot`, to validate a call's context
    /// once when its gate is built.
    context_action: Option<EntityUid>,
    entity_types: HashMap<String, EntityTypeName>,
    /// Codes a refusal may carry (the surface's denial codes); the first is the default.
    denial_codes: &'static [&'static str],
    /// Decisions already made under this policy set. Most calls repeat the ones before them
    /// (the tool on Host, the same files), and a lookup costs a hash where evaluating costs
    /// about 12 µs. Bounded: when full it is emptied.
    memo: std::sync::Mutex<HashMap<MemoKey, Decision>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("policies", &self.meta.len())
            .finish_non_exhaustive()
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text
        .get(line_start..offset)
        .map_or(1, |s| s.chars().count() + 1);
    (line, column)
}

fn first_label_offset(diag: &dyn miette::Diagnostic) -> Option<usize> {
    diag.labels()
        .and_then(|mut labels| labels.next())
        .map(|l| l.offset())
}

impl Engine {
    /// Loads the schema and every policy file, validating strictly. `denial_codes` are the
    /// codes a refusal may carry (a policy names one with `@code`), the first the default;
    /// they come from the surface's `[errors]`. Returns every problem at once; a policy set
    /// with any problem is never used.
    pub fn load(
        schema_text: &str,
        files: &[PolicyFile],
        denial_codes: &'static [&'static str],
    ) -> Result<Engine, Vec<LoadError>> {
        let Some(default_denial) = denial_codes.first().copied() else {
            return Err(vec![LoadError::Schema {
                reason: "no denial code given (the surface's [errors] marks none `denial`)".into(),
            }]);
        };
        let (schema, warnings) = Schema::from_cedarschema_str(schema_text).map_err(|e| {
            vec![LoadError::Schema {
                reason: e.to_string(),
            }]
        })?;
        let warnings: Vec<LoadError> = warnings
            .map(|w| LoadError::Schema {
                reason: w.to_string(),
            })
            .collect();
        if !warnings.is_empty() {
            return Err(warnings);
        }

        let mut errors = Vec::new();
        let mut policies = PolicySet::new();
        let mut meta = HashMap::new();
        // Where each policy starts, to place errors that carry no span of their own.
        let mut places: HashMap<String, (String, Arc<str>, usize)> = HashMap::new();
        for file in files {
            let text: Arc<str> = Arc::from(file.text.as_str());
            let set = match PolicySet::from_str(&file.text) {
                Ok(set) => set,
                Err(e) => {
                    let (line, column) =
                        first_label_offset(&e).map_or((1, 1), |o| line_column(&text, o));
                    errors.push(LoadError::Parse {
                        file: file.name.clone(),
                        line,
                        column,
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            if set.templates().next().is_some() {
                errors.push(LoadError::Parse {
                    file: file.name.clone(),
                    line: 1,
                    column: 1,
                    reason: "policy templates are not supported; write static policies".into(),
                });
            }
            let mut search_from = 0;
            for policy in set.policies() {
                let source = policy.to_string();
                let start = text
                    .get(search_from..)
                    .and_then(|t| t.find(source.trim()))
                    .map_or(search_from, |i| i + search_from);
                search_from = start + source.trim().len();
                let (line, column) = line_column(&text, start);
                let Some(id) = policy.annotation("id").map(str::to_string) else {
                    errors.push(LoadError::Policy {
                        policy: policy.id().to_string(),
                        file: file.name.clone(),
                        line,
                        column,
                        reason: "every policy needs an @id(\"area.rule\") annotation".into(),
                    });
                    continue;
                };
                if let Some((other, _, _)) = places.get(&id) {
                    errors.push(LoadError::Policy {
                        policy: id.clone(),
                        file: file.name.clone(),
                        line,
                        column,
                        reason: format!("duplicate @id (also used in {other})"),
                    });
                    continue;
                }
                let code = match policy.annotation("code") {
                    None => default_denial,
                    Some(c) => match denial_codes.iter().find(|k| **k == c) {
                        Some(k) => k,
                        None => {
                            errors.push(LoadError::Policy {
                                policy: id.clone(),
                                file: file.name.clone(),
                                line,
                                column,
                                reason: format!(
                                    "unknown @code `{c}` (use one of {})",
                                    denial_codes.join(", ")
                                ),
                            });
                            continue;
                        }
                    },
                };
                let renamed = policy.new_id(PolicyId::new(&id));
                if let Err(e) = policies.add(renamed) {
                    errors.push(LoadError::Policy {
                        policy: id.clone(),
                        file: file.name.clone(),
                        line,
                        column,
                        reason: e.to_string(),
                    });
                    continue;
                }
                meta.insert(
                    id.clone(),
                    PolicyMeta {
                        file: file.name.clone(),
                        reason: policy.annotation("reason").map(str::to_string),
                        code,
                    },
                );
                places.insert(id, (file.name.clone(), text.clone(), start));
            }
        }

        let validation = Validator::new(schema.clone()).validate(&policies, ValidationMode::Strict);
        let place = |id: &PolicyId, offset: Option<usize>| -> (String, usize, usize) {
            match places.get(&id.to_string()) {
                Some((file, text, start)) => {
                    let (line, column) = line_column(text, offset.unwrap_or(*start));
                    (file.clone(), line, column)
                }
                None => ("<unknown>".into(), 1, 1),
            }
        };
        // Cedar reports one error per action a policy applies to; one per place is enough.
        let mut seen = HashSet::new();
        for e in validation.validation_errors() {
            let (file, line, column) = place(e.policy_id(), first_label_offset(e));
            if seen.insert((e.policy_id().to_string(), line, column)) {
                errors.push(LoadError::Policy {
                    policy: e.policy_id().to_string(),
                    file,
                    line,
                    column,
                    reason: e.to_string(),
                });
            }
        }
        for w in validation.validation_warnings() {
            let (file, line, column) = place(w.policy_id(), first_label_offset(w));
            errors.push(LoadError::Policy {
                policy: w.policy_id().to_string(),
                file,
                line,
                column,
                reason: format!("{w} (warnings are errors)"),
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }

        let action_entities = schema.action_entities().map_err(|e| {
            vec![LoadError::Schema {
                reason: e.to_string(),
            }]
        })?;
        let actions: HashMap<String, (EntityUid, Entity)> = action_entities
            .iter()
            .map(|e| (e.uid().id().unescaped().to_string(), (e.uid(), e.clone())))
            .collect();
        let mut by_action = HashMap::new();
        for (name, (uid, _)) in &actions {
            let ancestors: HashSet<EntityUid> = action_entities
                .ancestors(uid)
                .map(|a| a.cloned().collect())
                .unwrap_or_default();
            let mut subset = PolicySet::new();
            for policy in policies.policies() {
                let applies = match policy.action_constraint() {
                    ActionConstraint::Any => true,
                    ActionConstraint::Eq(a) => &a == uid,
                    ActionConstraint::In(list) => {
                        list.iter().any(|a| a == uid || ancestors.contains(a))
                    }
                };
                if applies {
                    subset.add(policy.clone()).map_err(|e| {
                        vec![LoadError::Schema {
                            reason: e.to_string(),
                        }]
                    })?;
                }
            }
            by_action.insert(name.clone(), subset);
        }
        let mut entity_types: HashMap<String, EntityTypeName> = schema
            .entity_types()
            .map(|t| (t.to_string(), t.clone()))
            .collect();
        if let Ok(action) = EntityTypeName::from_str("Action") {
            entity_types.insert("Action".into(), action);
        }
        let resources_for: HashMap<String, HashSet<String>> = actions
            .iter()
            .filter_map(|(name, (uid, _))| {
                let types = schema
                    .resources_for_action(uid)?
                    .map(ToString::to_string)
                    .collect::<HashSet<_>>();
                Some((name.clone(), types))
            })
            .collect();
        let context_action = actions
            .iter()
            .filter(|(name, _)| resources_for.get(*name).is_some_and(|r| !r.is_empty()))
            .map(|(_, (uid, _))| uid.clone())
            .min_by_key(ToString::to_string);
        Ok(Engine {
            schema,
            policies,
            meta,
            actions,
            by_action,
            resources_for,
            context_action,
            entity_types,
            denial_codes,
            memo: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The code of a refusal no policy gave a code to.
    fn default_denial(&self) -> &'static str {
        self.denial_codes.first().copied().unwrap_or_default()
    }

    /// The ids of the loaded policies, sorted.
    pub fn policy_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.meta.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// A worker agent as a principal: `Worker::"<run>/<worker>"`, in `Run::"<run>"`, in the
    /// connector it was started through. Returns its uid and the entities its ancestry needs.
    pub(crate) fn worker_principal(
        &self,
        connector: &str,
        run: &str,
        worker: &str,
    ) -> Result<(EntityUid, Vec<Entity>), Denial> {
        let connector = self.connector_uid(connector)?;
        let (Some(run_ty), Some(worker_ty)) = (
            self.entity_types.get("Run"),
            self.entity_types.get("Worker"),
        ) else {
            return Err(self.engine_denial(
                "principal",
                "Worker",
                "the schema declares no Run and Worker types",
            ));
        };
        let run_uid = EntityUid::from_type_name_and_id(run_ty.clone(), EntityId::new(run));
        let worker_uid = EntityUid::from_type_name_and_id(
            worker_ty.clone(),
            EntityId::new(format!("{run}/{worker}")),
        );
        let run_entity = Entity::new_no_attrs(run_uid.clone(), HashSet::from([connector.clone()]));
        // Its ancestors listed whole, so a request needs no transitive-closure pass.
        let worker_entity =
            Entity::new_no_attrs(worker_uid.clone(), HashSet::from([run_uid, connector]));
        Ok((worker_uid, vec![run_entity, worker_entity]))
    }

    pub(crate) fn connector_uid(&self, connector: &str) -> Result<EntityUid, Denial> {
        let Some(ty) = self.entity_types.get("Connector") else {
            return Err(self.engine_denial(
                "principal",
                "Connector",
                "the schema declares no Connector type",
            ));
        };
        Ok(EntityUid::from_type_name_and_id(
            ty.clone(),
            EntityId::new(connector),
        ))
    }

    /// Turns a snapshot into the Cedar context every request of a call carries, validated
    /// against the schema. Build it once per snapshot and share it between calls.
    pub fn facts(&self, snapshot: &Snapshot) -> Result<Facts, Denial> {
        self.context(snapshot).map(|context| Facts {
            context,
            id: FACTS_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    fn context(&self, snapshot: &Snapshot) -> Result<Context, Denial> {
        let permissions = RestrictedExpression::new_record(
            snapshot
                .permissions
                .iter()
                .map(|(name, on)| ((*name).to_string(), RestrictedExpression::new_bool(*on))),
        );
        let permissions = match permissions {
            Ok(p) => p,
            Err(e) => return Err(self.engine_denial("context", "Host", &e.to_string())),
        };
        let context = Context::from_pairs([
            (
                "platform".to_string(),
                RestrictedExpression::new_string(snapshot.platform.to_string()),
            ),
            (
                "read_only".to_string(),
                RestrictedExpression::new_bool(snapshot.read_only),
            ),
            ("permissions".to_string(), permissions),
        ])
        .map_err(|e| self.engine_denial("context", "Host", &e.to_string()))?;
        // Every action shares the `Snapshot` context type: validating once per call is enough.
        if let Some(action) = &self.context_action {
            context
                .validate(&self.schema, action)
                .map_err(|e| self.engine_denial("context", "Host", &e.to_string()))?;
        }
        Ok(context)
    }

    fn engine_denial(
        &self,
        action: &'static str,
        resource_type: &'static str,
        reason: &str,
    ) -> Denial {
        Denial {
            code: self.default_denial(),
            action,
            resource_type,
            policy: None,
            reason: format!("the request could not be built ({reason}); denied"),
        }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, HashMap<MemoKey, Decision>> {
        match self.memo.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Evaluates one request. Never panics; anything that goes wrong is a deny with the
    /// error recorded.
    pub fn decide<R: Resource + ?Sized>(
        &self,
        principal: &EntityUid,
        principal_entities: &[Entity],
        action: ActionId,
        resource: &R,
        facts: &Facts,
    ) -> Decision {
        let key = MemoKey {
            facts: facts.id,
            principal: principal.to_string(),
            action: action.as_str(),
            resource_type: resource.entity_type(),
            resource_id: resource.id().to_string(),
            attributes: resource
                .attributes()
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        AttrValue::Bool(b) => AttrKey::Bool(b),
                        AttrValue::String(s) => AttrKey::String(s.to_string()),
                        AttrValue::Long(n) => AttrKey::Long(n),
                    };
                    (k, v)
                })
                .collect(),
        };
        // A long resource (a deep missing path, a command line) is decided afresh: the memo
        // holds small keys only, so its size stays bounded by MEMO_ENTRIES × MEMO_KEY_BYTES.
        let small = key.resource_id.len()
            + key
                .attributes
                .iter()
                .map(|(_, v)| match v {
                    AttrKey::String(s) => s.len(),
                    AttrKey::Bool(_) | AttrKey::Long(_) => 8,
                })
                .sum::<usize>()
            <= MEMO_KEY_BYTES;
        #[cfg(test)]
        let use_memo = small && !FULL_SET.with(std::cell::Cell::get);
        #[cfg(not(test))]
        let use_memo = small;
        if use_memo && let Some(d) = self.memo().get(&key) {
            return d.clone();
        }
        let decision = match self.try_decide(
            principal,
            principal_entities,
            action,
            resource,
            &facts.context,
        ) {
            Ok(d) => d,
            Err(e) => Decision {
                allowed: false,
                policies: Vec::new(),
                errors: vec![e],
            },
        };
        if use_memo {
            let mut m = self.memo();
            if m.len() >= MEMO_ENTRIES {
                m.clear();
            }
            m.insert(key, decision.clone());
        }
        decision
    }

    fn try_decide<R: Resource + ?Sized>(
        &self,
        principal: &EntityUid,
        principal_entities: &[Entity],
        action: ActionId,
        resource: &R,
        context: &Context,
    ) -> Result<Decision, String> {
        let (action_uid, action_entity) = self
            .actions
            .get(action.as_str())
            .ok_or_else(|| format!("action `{action}` is not in the schema"))?;
        let ty = self
            .entity_types
            .get(resource.entity_type())
            .ok_or_else(|| {
                format!(
                    "resource type `{}` is not in the schema",
                    resource.entity_type()
                )
            })?;
        if !self
            .resources_for
            .get(action.as_str())
            .is_some_and(|r| r.contains(resource.entity_type()))
        {
            return Err(format!(
                "action `{action}` does not apply to a {}",
                resource.entity_type()
            ));
        }
        let uid = EntityUid::from_type_name_and_id(ty.clone(), EntityId::new(resource.id()));
        let attrs: HashMap<String, RestrictedExpression> = resource
            .attributes()
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    AttrValue::Bool(b) => RestrictedExpression::new_bool(b),
                    AttrValue::String(s) => RestrictedExpression::new_string(s.to_string()),
                    AttrValue::Long(n) => RestrictedExpression::new_long(n),
                };
                (k.to_string(), v)
            })
            .collect();
        let entity = Entity::new(uid.clone(), attrs, HashSet::new()).map_err(|e| e.to_string())?;
        let entities = Entities::from_entities(
            [action_entity.clone(), entity]
                .into_iter()
                .chain(principal_entities.iter().cloned()),
            None,
        )
        .map_err(|e| e.to_string())?;
        let request = Request::new(
            principal.clone(),
            action_uid.clone(),
            uid,
            context.clone(),
            None,
        )
        .map_err(|e| e.to_string())?;
        let policies = self
            .by_action
            .get(action.as_str())
            .unwrap_or(&self.policies);
        #[cfg(test)]
        let policies = if FULL_SET.with(std::cell::Cell::get) {
            &self.policies
        } else {
            policies
        };
        let response = Authorizer::new().is_authorized(&request, policies, &entities);
        let errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(ToString::to_string)
            .collect();
        let mut policies: Vec<String> = response
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        policies.sort();
        let allowed = response.decision() == cedar_policy::Decision::Allow && errors.is_empty();
        Ok(Decision {
            allowed,
            policies,
            errors,
        })
    }

    pub(crate) fn denial<R: Resource + ?Sized>(
        &self,
        action: ActionId,
        resource: &R,
        decision: Decision,
    ) -> Denial {
        let resource_type = resource.entity_type();
        if let Some(error) = decision.errors.first() {
            return Denial {
                code: self.default_denial(),
                action: action.as_str(),
                resource_type,
                policy: None,
                reason: format!(
                    "the policies could not be evaluated, so the call is refused ({})",
                    bounded(error)
                ),
            };
        }
        // Forbids decide a deny; pick the first with an author's reason.
        let deciding = decision
            .policies
            .iter()
            .find(|id| self.meta.get(*id).is_some_and(|m| m.reason.is_some()))
            .or(decision.policies.first());
        match deciding.and_then(|id| self.meta.get(id).map(|m| (id, m))) {
            Some((id, meta)) => Denial {
                code: meta.code,
                action: action.as_str(),
                resource_type,
                policy: Some(PolicyRef {
                    id: id.clone(),
                    file: meta.file.clone(),
                }),
                reason: meta
                    .reason
                    .clone()
                    .unwrap_or_else(|| "forbidden by policy".into()),
            },
            None => Denial {
                code: self.default_denial(),
                action: action.as_str(),
                resource_type,
                policy: None,
                reason: "no policy permits it".into(),
            },
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Lets tests evaluate against the whole policy set, to prove the per-action subsets
    /// decide the same.
    pub(crate) static FULL_SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Cedar's error texts can quote values; keep what reaches a caller short.
fn bounded(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
