//! The Gateway connector: the tools of the config's upstream MCP servers, listed as
//! `<server>__<tool>` with their own schemas, each call decided on its `Upstream::"server/
//! tool"` resource before it is sent, so a denied tool never reaches its server (and is not
//! listed either).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use generated::gateway::{GatewayHandlers, actions, limits};
use generated::resources::Upstream as UpstreamResource;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use tool_api::{CallContext, Content, Encoded, ErrorCode, ToolError};

use config::upstream::{SEPARATOR, UpstreamConfig};
use upstream::{Upstream, UpstreamCall, Waits};

/// Handlers of the Gateway connector.
#[derive(Debug, Clone, Default)]
pub struct GatewayTools {
    upstreams: Arc<Vec<Upstream>>,
    /// Each server's tools as last listed: a call finds its tool's hints here.
    known: Arc<Mutex<HashMap<String, Vec<Tool>>>>,
}

fn listed_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

impl GatewayTools {
    /// The servers of `[gateway.servers]`; none is started until it is needed. A stdio
    /// server runs in a cgroup of `terminal`'s where it makes them.
    pub fn new(
        servers: Vec<(String, UpstreamConfig)>,
        terminal: &Arc<terminal::Registry>,
    ) -> GatewayTools {
        let registry = Arc::downgrade(terminal);
        let contain: upstream::Contain = Arc::new(move || {
            let group = registry.upgrade()?.new_group()?;
            let guard: Box<dyn std::any::Any + Send + Sync> = Box::new(group.clone());
            Some((group.join_prefix(), guard))
        });
        let waits = |config: &UpstreamConfig| {
            let own = config
                .timeout()
                .ok()
                .flatten()
                .unwrap_or(std::time::Duration::MAX);
            Waits {
                // The answer's JSON-RPC envelope around a result at the limit.
                max_message: limits::upstream::MAX_RESULT.as_usize() + (64 << 10),
                start: limits::upstream::START_TIMEOUT.duration().min(own),
                list: limits::upstream::LIST_TIMEOUT.duration().min(own),
                call: limits::upstream::CALL_TIMEOUT.duration().min(own),
                first_retry: limits::upstream::RETRY_AFTER.duration(),
                last_retry: limits::upstream::RETRY_AFTER.duration(),
            }
        };
        GatewayTools {
            upstreams: Arc::new(
                servers
                    .into_iter()
                    .map(|(name, config)| {
                        let waits = waits(&config);
                        Upstream::new(name, config, waits, Some(contain.clone()))
                    })
                    .collect(),
            ),
            known: Arc::default(),
        }
    }

    fn resource(server: &str, tool: &Tool) -> UpstreamResource {
        UpstreamResource {
            id: format!("{server}/{}", tool.name),
            server: server.to_string(),
            tool: tool.name.to_string(),
            read_only_hint: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        }
    }

    async fn tools_of(&self, upstream: &Upstream) -> Result<Vec<Tool>, ToolError> {
        let tools = upstream.tools().await?;
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(upstream.name.clone(), tools.clone());
        Ok(tools)
    }

    /// The upstream tools `cx`'s caller may call, renamed `<server>__<tool>`. A server that
    /// cannot be reached is left out (and logged), never waited on past its bounds.
    pub async fn list(&self, cx: &CallContext) -> Vec<Tool> {
        let listings = futures_util::future::join_all(
            self.upstreams
                .iter()
                .map(|u| async move { (u, self.tools_of(u).await) }),
        )
        .await;
        let mut out = Vec::new();
        for (upstream, listing) in listings {
            let tools = match listing {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(server = %upstream.name, error = %e.message, "an upstream server's tools are not listed");
                    continue;
                }
            };
            for tool in tools {
                let listed = format!("{}{SEPARATOR}{}", upstream.name, tool.name);
                if !listed_name_ok(&listed) {
                    tracing::warn!(server = %upstream.name, tool = %tool.name.chars().take(80).collect::<String>(), "an upstream tool's name does not fit MCP's rules once prefixed; not listed");
                    continue;
                }
                if !cx.permits(actions::UPSTREAM, &Self::resource(&upstream.name, &tool)) {
                    continue;
                }
                if out.len() == limits::upstream::MAX_TOOLS {
                    tracing::warn!(
                        "upstream tools past {} are not listed",
                        limits::upstream::MAX_TOOLS
                    );
                    return out;
                }
                let mut tool = tool;
                tool.name = listed.into();
                out.push(tool);
            }
        }
        out
    }

    /// Stops every upstream server (server shutdown).
    pub fn stop(&self) {
        for u in self.upstreams.iter() {
            u.stop_now();
        }
    }
}

/// Another MCP server's content blocks as gantry's reply: its text blocks joined, images and
/// audio kept, links and embedded resources as the JSON they are (nothing is dropped).
pub(super) fn content_of(blocks: Vec<ContentBlock>) -> (String, Vec<Content>) {
    let mut texts = Vec::new();
    let mut extra = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => texts.push(t.text),
            ContentBlock::Image(i) => extra.push(Content::Image {
                data: i.data,
                mime: i.mime_type,
            }),
            ContentBlock::Audio(a) => extra.push(Content::Audio {
                data: a.data,
                mime: a.mime_type,
            }),
            other => texts.push(serde_json::to_string(&other).unwrap_or_default()),
        }
    }
    (texts.join("\n"), extra)
}

/// An upstream result as gantry's reply: its text blocks joined, images and audio kept,
/// `structuredContent` passed through; over the size limit it is refused whole.
fn encode(server: &str, result: CallToolResult) -> Result<Encoded, ToolError> {
    let size = serde_json::to_string(&result).map_or(usize::MAX, |s| s.len());
    if size > limits::upstream::MAX_RESULT.as_usize() {
        return Err(ToolError::new(
            ErrorCode::OutputLimit,
            format!(
                "upstream `{server}` answered {size} bytes, over the limit of {}",
                limits::upstream::MAX_RESULT
            ),
        ));
    }
    let (text, extra) = content_of(result.content);
    Ok(Encoded {
        structured: result.structured_content,
        meta: None,
        text,
        extra,
        failed: result.is_error == Some(true),
    })
}

impl GatewayHandlers for GatewayTools {
    async fn upstream(
        &self,
        name: &str,
        arguments: tool_api::JsonObject,
        cx: &CallContext,
    ) -> Result<Encoded, ToolError> {
        let unknown = || ToolError::unknown_tool(name);
        // Only a name that could have been listed: none is reached that tools/list leaves out.
        if !listed_name_ok(name) {
            return Err(unknown());
        }
        let (server, tool) = name.split_once(SEPARATOR).ok_or_else(unknown)?;
        let upstream = self
            .upstreams
            .iter()
            .find(|u| u.name == server)
            .ok_or_else(unknown)?;
        let cached = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(server)
            .and_then(|tools| tools.iter().find(|t| t.name == tool).cloned());
        let declared = match cached {
            Some(t) => t,
            None => self
                .tools_of(upstream)
                .await?
                .into_iter()
                .find(|t| t.name == tool)
                .ok_or_else(unknown)?,
        };
        let call = UpstreamCall {
            tool: tool.to_string(),
            arguments,
            meta: None,
        };
        let call = cx.authorize(actions::UPSTREAM, &Self::resource(server, &declared), call)?;
        encode(server, upstream.call(call).await?)
    }
}
