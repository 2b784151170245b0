//! The Hosts connector: the Core tools on the machines under `[hosts]`, each reached by the
//! system's `ssh` running `gantry serve --stdio` there. A call is decided here first, on its
//! `RemoteHost::"name"` resource (so a policy can forbid a tool on one machine), then sent
//! with its arguments as given, less `host`, and decided again by that machine's gantry with
//! its own permissions, roots and policies. Both audit it under the hub's call id.

use std::sync::Arc;

use config::machines::MachineConfig;
use generated::core::actions as core;
use generated::hosts::{
    HostsHandlers, ListHostsArgs, ListHostsOutput, actions, limits::exec_command as exec_limits,
    limits::list_hosts,
};
use generated::resources::RemoteHost;
use generated::types::HostState;
use rmcp::model::CallToolResult;
use tool_api::{ActionId, Authorized, CallContext, Encoded, ErrorCode, Reply, ToolError};
use upstream::{Upstream, UpstreamCall, Waits};

/// The `_meta` key a relayed call carries the hub's call id under; the remote's audit keeps
/// it among the call's labels, so the two lines can be joined.
pub const HUB_CALL_META: &str = "gantry/hub_call";

/// How long a failed connection's ssh is given to finish saying why.
const SAID_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// One machine and its connection.
struct Machine {
    name: String,
    upstream: Upstream,
    /// Where its ssh writes its own messages.
    ssh_log: std::path::PathBuf,
}

/// Handlers of the Hosts connector.
#[derive(Clone, Default)]
pub struct HostsTools {
    machines: Arc<Vec<Machine>>,
}

impl std::fmt::Debug for HostsTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.machines.iter().map(|m| &m.name))
            .finish()
    }
}

impl HostsTools {
    /// The machines of `[hosts]`; none is reached until a call needs it. Each `ssh` runs in
    /// a cgroup of `terminal`'s where it makes them, ended with its connection.
    pub fn new(
        machines: Vec<(String, MachineConfig)>,
        state_dir: &std::path::Path,
        terminal: &Arc<terminal::Registry>,
    ) -> HostsTools {
        let registry = Arc::downgrade(terminal);
        let contain: upstream::Contain = Arc::new(move || {
            let group = registry.upgrade()?.new_group()?;
            let guard: Box<dyn std::any::Any + Send + Sync> = Box::new(group.clone());
            Some((group.join_prefix(), guard))
        });
        let waits = Waits {
            max_message: list_hosts::MAX_RESULT.as_usize() + (64 << 10),
            start: list_hosts::START_TIMEOUT.duration(),
            list: list_hosts::START_TIMEOUT.duration(),
            call: list_hosts::CALL_TIMEOUT.duration(),
            first_retry: list_hosts::FIRST_RETRY.duration(),
            last_retry: list_hosts::LAST_RETRY.duration(),
        };
        let machines = machines
            .into_iter()
            .map(|(name, config)| {
                let machine = remote::Machine {
                    name: &name,
                    config: &config,
                    state_dir,
                };
                if let Err(e) = machine.prepare() {
                    tracing::warn!(host = %name, error = %e, "the shared-connection directory could not be made");
                }
                let command = machine.serve_command(remote::Sharing::Start);
                let ssh_log = machine.ssh_log();
                let log = ssh_log.clone();
                // Its stdout is what its commands can write to: a line that is not JSON-RPC
                // ends the connection rather than keep this server busy dropping lines.
                let upstream = Upstream::new(name.clone(), command, waits, Some(contain.clone()))
                    .keeping_stderr()
                    .strict_json()
                    .before_start(move || {
                        let _ = std::fs::File::create(&log);
                    });
                Machine {
                    name,
                    upstream,
                    ssh_log,
                }
            })
            .collect();
        HostsTools {
            machines: Arc::new(machines),
        }
    }

    /// Whether any machine is configured (the connector is served only then).
    pub fn any(&self) -> bool {
        !self.machines.is_empty()
    }

    /// The machine `name`; an unknown one is refused naming only those `cx` may see.
    fn machine(&self, name: &str, cx: &CallContext) -> Result<&Machine, ToolError> {
        if let Some(m) = self.machines.iter().find(|m| m.name == name) {
            return Ok(m);
        }
        let known: Vec<&str> = self
            .machines
            .iter()
            .filter(|m| cx.permits(actions::LIST_HOSTS, &RemoteHost { id: m.name.clone() }))
            .map(|m| m.name.as_str())
            .collect();
        Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "host `{}` is not under [hosts] in the config (hosts: {})",
                name.chars().take(32).collect::<String>(),
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ),
        ))
    }

    /// A failure reaching `machine`, in the user's terms: what ssh said, if it said anything.
    async fn unreachable(machine: &Machine, e: ToolError) -> ToolError {
        let renamed =
            |e: ToolError| ToolError::new(e.code, e.message.replacen("upstream `", "host `", 1));
        let remote_said = match e.code {
            // A failed connection: ssh is saying why as it exits.
            ErrorCode::OsError => machine.upstream.said_settled(SAID_WITHIN).await,
            ErrorCode::Timeout => machine.upstream.said(),
            _ => return renamed(e),
        };
        let ssh_said = std::fs::read_to_string(&machine.ssh_log).unwrap_or_default();
        if ssh_said.trim().is_empty() && remote_said.trim().is_empty() {
            return renamed(e);
        }
        let (failure, sentence) = remote::explain(&machine.name, &ssh_said, &remote_said);
        let code = match failure {
            remote::Failure::KeyChanged | remote::Failure::KeyNotPinned => {
                ErrorCode::PermissionDenied
            }
            _ => e.code,
        };
        ToolError::new(code, sentence)
    }

    /// Sends tool `tool` with `arguments` (its `host`/`hosts` taken out) to `machine`, once
    /// `action` on it is allowed here.
    async fn relay(
        &self,
        machine: &Machine,
        action: ActionId,
        tool: &str,
        mut arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let resource = RemoteHost {
            id: machine.name.clone(),
        };
        arguments.remove("host");
        arguments.remove("hosts");
        let meta = cx.call_id().map(|id| {
            serde_json::Map::from_iter([(HUB_CALL_META.to_string(), serde_json::json!(id))])
        });
        let call = cx.authorize(
            action,
            &resource,
            UpstreamCall {
                tool: tool.to_string(),
                arguments,
                meta,
            },
        )?;
        match machine.upstream.call(call).await {
            Ok(result) => answer(&machine.name, result),
            Err(e) => Err(Self::unreachable(machine, e).await),
        }
    }

    /// Ends every machine's connection, and with it the gantry there (server shutdown).
    pub fn stop(&self) {
        for m in self.machines.iter() {
            m.upstream.stop_now();
        }
    }
}

/// The remote gantry's answer as this call's: its text and facts as they are; its error as
/// an error of the same code, naming the machine.
fn answer(host: &str, result: CallToolResult) -> Result<Encoded, ToolError> {
    let size = serde_json::to_string(&result).map_or(usize::MAX, |s| s.len());
    if size > list_hosts::MAX_RESULT.as_usize() {
        return Err(ToolError::new(
            ErrorCode::OutputLimit,
            format!(
                "host `{host}` answered {size} bytes, over the limit of {}",
                list_hosts::MAX_RESULT
            ),
        ));
    }
    let (text, extra) = super::gateway::content_of(result.content);
    // Only gantry's own keys: the machine's answer is its commands' to forge, and a key such
    // as a UI template would reach the client as if this server had sent it.
    let meta = result.meta.map(|m| {
        m.0.into_iter()
            .filter(|(k, _)| k == tool_api::FACTS_META_KEY || k == tool_api::ERROR_META_KEY)
            .collect::<serde_json::Map<_, _>>()
    });
    let code = meta
        .as_ref()
        .and_then(|m| m.get(tool_api::ERROR_META_KEY))
        .and_then(|e| e.get("code"))
        .and_then(|c| c.as_str())
        .and_then(ErrorCode::from_code);
    if result.is_error == Some(true)
        && let Some(code) = code
    {
        let said = text
            .strip_prefix(code.as_str())
            .and_then(|t| t.strip_prefix(": "))
            .unwrap_or(&text);
        return Err(ToolError::new(code, format!("host `{host}`: {said}")));
    }
    Ok(Encoded {
        structured: result.structured_content,
        meta,
        text,
        extra,
        failed: result.is_error == Some(true),
    })
}

impl HostsHandlers for HostsTools {
    async fn list_hosts(
        &self,
        _call: Authorized<ListHostsArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ListHostsOutput>, ToolError> {
        let visible: Vec<&Machine> = self
            .machines
            .iter()
            .filter(|m| cx.permits(actions::LIST_HOSTS, &RemoteHost { id: m.name.clone() }))
            .collect();
        let states = futures_util::future::join_all(visible.iter().map(|m| async move {
            match m.upstream.server_version().await {
                Ok(version) => HostState {
                    name: m.name.clone(),
                    answers: true,
                    version: Some(version),
                    problem: None,
                },
                Err(e) => HostState {
                    name: m.name.clone(),
                    answers: false,
                    version: None,
                    problem: Some(Self::unreachable(m, e).await.message),
                },
            }
        }))
        .await;
        let mut text = String::new();
        for h in &states {
            match (&h.version, &h.problem) {
                (Some(v), _) => text.push_str(&format!("{}: answers (gantry {v})\n", h.name)),
                (None, Some(p)) => text.push_str(&format!("{}: does not answer: {p}\n", h.name)),
                (None, None) => text.push_str(&format!("{}: does not answer\n", h.name)),
            }
        }
        if states.is_empty() {
            text.push_str("no host is configured (or none may be used): the user adds one with `gantry hosts add NAME user@host`\n");
        }
        Ok(Reply::rendered(ListHostsOutput { hosts: states }, text))
    }

    async fn read(
        &self,
        call: Authorized<generated::hosts::ReadArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(m, actions::READ, core::READ.as_str(), arguments, cx)
            .await
    }

    async fn view_image(
        &self,
        call: Authorized<generated::hosts::ViewImageArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(
            m,
            actions::VIEW_IMAGE,
            core::VIEW_IMAGE.as_str(),
            arguments,
            cx,
        )
        .await
    }

    async fn find(
        &self,
        call: Authorized<generated::hosts::FindArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(m, actions::FIND, core::FIND.as_str(), arguments, cx)
            .await
    }

    async fn apply_patch(
        &self,
        call: Authorized<generated::hosts::ApplyPatchArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(
            m,
            actions::APPLY_PATCH,
            core::APPLY_PATCH.as_str(),
            arguments,
            cx,
        )
        .await
    }

    async fn exec_command(
        &self,
        call: Authorized<generated::hosts::ExecCommandArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let args = call.into_inner();
        let names: Vec<String> = match (args.host, args.hosts) {
            (Some(one), _) => {
                return self
                    .relay(
                        self.machine(&one, cx)?,
                        actions::EXEC_COMMAND,
                        core::EXEC_COMMAND.as_str(),
                        arguments,
                        cx,
                    )
                    .await;
            }
            (None, Some(many)) => many,
            (None, None) => Vec::new(),
        };
        // Every name is known before any command starts.
        let mut machines = Vec::new();
        for name in &names {
            let m = self.machine(name, cx)?;
            if !machines.iter().any(|o: &&Machine| o.name == m.name) {
                machines.push(m);
            }
        }
        // At most FAN_OUT machines at a time, each answer in the order asked.
        let gate = tokio::sync::Semaphore::new(exec_limits::FAN_OUT);
        let mut pending = Vec::new();
        for m in machines {
            let arguments = arguments.clone();
            let gate = &gate;
            pending.push(async move {
                let _turn = gate.acquire().await;
                let r = self
                    .relay(
                        m,
                        actions::EXEC_COMMAND,
                        core::EXEC_COMMAND.as_str(),
                        arguments,
                        cx,
                    )
                    .await;
                (m, r)
            });
        }
        let answers = futures_util::future::join_all(pending).await;
        let mut text = String::new();
        let mut facts = Vec::new();
        let mut all_failed = true;
        for (m, answer) in answers {
            text.push_str(&format!("── host {} ──\n", m.name));
            match answer {
                Ok(e) => {
                    all_failed &= e.failed;
                    text.push_str(&e.text);
                    facts.push(serde_json::json!({
                        "host": m.name,
                        "result": e.meta.as_ref().and_then(|m| m.get(tool_api::FACTS_META_KEY)).cloned(),
                    }));
                }
                Err(e) => {
                    text.push_str(&e.to_string());
                    facts.push(serde_json::json!({ "host": m.name, "error": e.code.as_str() }));
                }
            }
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        Ok(Encoded {
            structured: None,
            meta: Some(serde_json::Map::from_iter([(
                "gantry/hosts".to_string(),
                serde_json::Value::Array(facts),
            )])),
            text,
            extra: Vec::new(),
            failed: all_failed,
        })
    }

    async fn write_stdin(
        &self,
        call: Authorized<generated::hosts::WriteStdinArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(
            m,
            actions::WRITE_STDIN,
            core::WRITE_STDIN.as_str(),
            arguments,
            cx,
        )
        .await
    }

    async fn session(
        &self,
        call: Authorized<generated::hosts::SessionArgs>,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let m = self.machine(&call.into_inner().host, cx)?;
        self.relay(m, actions::SESSION, core::SESSION.as_str(), arguments, cx)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn a_machine_answer_keeps_only_gantrys_own_meta_and_its_error_names_it() {
        let mut ok = CallToolResult::success(vec![ContentBlock::text("hi")]);
        ok.meta = Some(rmcp::model::MetaObject(serde_json::Map::from_iter([
            (
                tool_api::FACTS_META_KEY.to_string(),
                serde_json::json!({ "exit_code": 0 }),
            ),
            (
                "openai/outputTemplate".to_string(),
                serde_json::json!("ui://evil"),
            ),
        ])));
        let e = answer("a", ok).unwrap();
        let meta = e.meta.unwrap();
        assert!(meta.contains_key(tool_api::FACTS_META_KEY));
        assert!(!meta.contains_key("openai/outputTemplate"), "{meta:?}");
        let mut refused = CallToolResult::error(vec![ContentBlock::text(
            "PERMISSION_DENIED: `exec_command` denied",
        )]);
        refused.meta = Some(rmcp::model::MetaObject(serde_json::Map::from_iter([(
            tool_api::ERROR_META_KEY.to_string(),
            serde_json::json!({ "code": "PERMISSION_DENIED" }),
        )])));
        let e = answer("b", refused).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        assert_eq!(e.message, "host `b`: `exec_command` denied");
    }
}
