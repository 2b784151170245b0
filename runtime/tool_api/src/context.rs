//! The per-call context handlers receive.

use std::sync::{Arc, Mutex};

use authz::{ActionId, Authorized, Gate, Resource};

use crate::ToolError;

/// Most decisions one call records for the audit (a patch or a batch can ask many; 100
/// queries of a `file` batch, a patch's every file, a read's 64 paths all fit, so no target
/// hides behind decoys); the count of the rest is kept. At 200 characters a target, a line
/// stays under a few hundred KB.
const MAX_RECORDED: usize = 1024;

/// Longest resource id an audit record keeps (a command line is cut here).
pub const MAX_RECORDED_ID_CHARS: usize = 200;

/// One Cedar decision of a call, as the audit log shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decided {
    /// The Cedar action (`read`, `apply_patch:update`...).
    pub action: &'static str,
    /// The resource type (`Host`, `Path`, `Command`...).
    pub resource_type: &'static str,
    /// The resource as Cedar saw it (a resolved path, a command line cut to
    /// [`MAX_RECORDED_ID_CHARS`], a session id); empty for `Host`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// `allow` or `deny`.
    pub decision: &'static str,
    /// The policies that decided.
    pub policies: Vec<String>,
}

#[derive(Debug, Default)]
struct Record {
    decided: Vec<Decided>,
    more: usize,
    input: Option<String>,
}

/// Everything a handler knows about the call besides its arguments: which connector it came
/// through and the gate that decides its sub-requests against the snapshot taken on arrival.
/// Every decision is recorded for the audit log.
#[derive(Debug, Clone)]
pub struct CallContext {
    gate: Gate,
    record: Arc<Mutex<Record>>,
    /// The config file a refused permission is turned on in, for the denial's hint.
    config_file: Option<Arc<str>>,
    /// Why part of a config or policy change is not applied yet, said in every denial.
    settling: Option<Arc<str>>,
    /// The call's id in the audit, which a call carried to another machine passes on.
    call_id: Option<Arc<str>>,
}

impl CallContext {
    /// A context deciding through `gate`.
    pub fn new(gate: Gate) -> Self {
        Self {
            gate,
            record: Arc::default(),
            config_file: None,
            settling: None,
            call_id: None,
        }
    }

    /// Names the call by its id in the audit.
    pub fn with_call_id(mut self, id: &str) -> Self {
        self.call_id = Some(Arc::from(id));
        self
    }

    /// The call's id in the audit, when the server gave it one.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// Names the config file in denials a setting there can lift, so the user learns where
    /// to change it (the model reads it too, and knows not to retry).
    pub fn with_config_file(mut self, path: &std::path::Path) -> Self {
        self.config_file = Some(Arc::from(path.display().to_string()));
        self
    }

    /// Says in every denial of this call that a change to the config or a policy file is
    /// still settling (what it turns on is not in effect yet).
    pub fn with_settling(mut self, note: Option<&str>) -> Self {
        self.settling = note.map(Arc::from);
        self
    }

    /// What the user can change to allow a refusal by `policy`, if a setting can.
    fn how_to_allow(&self, policy: &str) -> Option<String> {
        let file = self.config_file.as_deref()?;
        if let Some(permission) = policy.strip_prefix("permission.") {
            Some(format!(
                "to allow it, set `{permission} = true` under [permissions] in {file} (applies from the next call)"
            ))
        } else if policy == "mode.read_only" {
            Some(format!(
                "to allow it, set `read_only = false` in {file} (or on the control page), or start gantry without --read-only and without GANTRY_READ_ONLY"
            ))
        } else {
            None
        }
    }

    /// The connector the call arrived on.
    pub fn connector(&self) -> &str {
        self.gate.connector()
    }

    /// The worker agent that made the call, proven by the endpoint it arrived on; `None` for
    /// the connector's own client.
    pub fn worker(&self) -> Option<&authz::WorkerId> {
        self.gate.worker()
    }

    /// Who owns what the call starts (command sessions, their spill files): the connector's
    /// own client and each worker own theirs apart.
    pub fn owner(&self) -> String {
        self.gate.owner()
    }

    /// Asks the policies about `action` on `resource`; on a permit returns `value` as
    /// [`Authorized`], otherwise the denial as a tool error.
    pub fn authorize<R: Resource + ?Sized, T>(
        &self,
        action: ActionId,
        resource: &R,
        value: T,
    ) -> Result<Authorized<T>, ToolError> {
        let outcome = self.gate.authorize(action, resource, value);
        let (decision, policies) = match &outcome {
            Ok(a) => ("allow", a.policies().to_vec()),
            Err(d) => ("deny", d.policy.iter().map(|p| p.id.clone()).collect()),
        };
        let resource_type = resource.entity_type();
        let shown = if resource_type == "Host" {
            String::new()
        } else {
            resource.id().chars().take(MAX_RECORDED_ID_CHARS).collect()
        };
        if let Ok(mut r) = self.record.lock() {
            if r.decided.len() < MAX_RECORDED {
                r.decided.push(Decided {
                    action: action.as_str(),
                    resource_type,
                    resource: shown,
                    decision,
                    policies,
                });
            } else {
                r.more += 1;
            }
        }
        outcome.map_err(|d| {
            let hint = d.policy.as_ref().and_then(|p| self.how_to_allow(&p.id));
            let mut e = ToolError::from(d);
            if let Some(hint) = hint {
                e = ToolError::new(e.code, format!("{}; {hint}", e.message));
            }
            if let Some(note) = &self.settling {
                e = ToolError::new(e.code, format!("{} ({note})", e.message));
            }
            e
        })
    }

    /// Whether the policies would allow `action` on `resource`: a question that shapes how
    /// the call is carried out (keep the desktop variables? quote the file?), not a target
    /// of the call, so it is not recorded for the audit.
    pub fn permits<R: Resource + ?Sized>(&self, action: ActionId, resource: &R) -> bool {
        self.gate.authorize(action, resource, ()).is_ok()
    }

    /// Records what the call sends into a running command (a session's input is what runs
    /// there), cut to [`MAX_RECORDED_ID_CHARS`], for the audit.
    pub fn record_input(&self, input: &str) {
        if let Ok(mut r) = self.record.lock() {
            r.input = Some(input.chars().take(MAX_RECORDED_ID_CHARS).collect());
        }
    }

    /// The input recorded with [`Self::record_input`], if any.
    pub fn input(&self) -> Option<String> {
        self.record.lock().ok().and_then(|r| r.input.clone())
    }

    /// The decisions made so far, and how many more were made than recorded.
    pub fn decisions(&self) -> (Vec<Decided>, usize) {
        match self.record.lock() {
            Ok(r) => (r.decided.clone(), r.more),
            Err(_) => (Vec::new(), 0),
        }
    }
}
