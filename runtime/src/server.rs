//! One connector as an MCP server: tools/list from the live permissions, tools/call through
//! the generated dispatch (decode → authorize → handler).

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tool_api::{CallContext, ConnectorSpec, Encoded, ToolError};

use crate::app::App;
use crate::audit::Entry;

/// How many client `_meta` labels an audit line keeps, and how long each may be.
const MAX_LABELS: usize = 4;
const MAX_LABEL_CHARS: usize = 128;

/// The MCP server of one connector. Cheap to clone: the HTTP transport makes one per request.
#[derive(Clone)]
pub struct ConnectorServer {
    app: Arc<App>,
    connector: &'static ConnectorSpec,
}

impl ConnectorServer {
    /// The server of `connector`.
    pub fn new(app: Arc<App>, connector: &'static ConnectorSpec) -> Self {
        Self { app, connector }
    }

    /// The tools this connector lists right now.
    pub fn listed(&self) -> Vec<Tool> {
        let published: Vec<&str> = self
            .app
            .permissions
            .published(self.connector.name)
            .map(|t| t.name)
            .collect();
        self.app
            .tools
            .iter()
            .filter(|t| published.contains(&t.spec.name))
            .map(|t| t.tool.clone())
            .collect()
    }

    /// Runs one call through the generated dispatch.
    pub async fn call(
        &self,
        name: &str,
        arguments: rmcp::model::JsonObject,
    ) -> Result<Encoded, ToolError> {
        let gate = authz::Gate::new(
            self.app.engine.clone(),
            self.connector.name,
            &self.app.facts,
        )?;
        let cx = CallContext::new(gate);
        self.app
            .handlers
            .dispatch(self.connector.name, &cx, name, arguments)
            .await
    }
}

fn to_result(outcome: Result<Encoded, ToolError>) -> CallToolResult {
    match outcome {
        Ok(encoded) => {
            let mut content = vec![ContentBlock::text(encoded.text)];
            content.extend(
                encoded
                    .images
                    .into_iter()
                    .map(|i| ContentBlock::image(i.data, i.mime)),
            );
            let mut result = CallToolResult::success(content);
            result.structured_content = Some(encoded.structured);
            result
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    }
}

fn labels(cx: &RequestContext<RoleServer>) -> Vec<(&'static str, String)> {
    // Labels correlate audit lines with the client's conversation; they never authorize.
    const KEYS: [&str; MAX_LABELS] = [
        "openai/session",
        "openai/subject",
        "openai/userAgent",
        "openai/locale",
    ];
    KEYS.iter()
        .filter_map(|k| {
            cx.meta
                .get(*k)
                .and_then(|v| v.as_str())
                .map(|v| (*k, v.chars().take(MAX_LABEL_CHARS).collect()))
        })
        .collect()
}

impl ServerHandler for ConnectorServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gantry", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.connector.instructions)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.app
            .tools
            .iter()
            .find(|t| t.spec.connector == self.connector.name && t.spec.name == name)
            .map(|t| t.tool.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let name: String = request.name.chars().take(64).collect();
        let outcome = self
            .call(&request.name, request.arguments.unwrap_or_default())
            .await;
        let code = match &outcome {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        };
        let duration = started.elapsed();
        tracing::info!(connector = self.connector.name, tool = %name, outcome = code, duration_us = duration.as_micros() as u64, "tool call");
        self.app.audit.record(&Entry {
            ts_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            connector: self.connector.name,
            tool: &name,
            outcome: code,
            duration_us: duration.as_micros(),
            labels: labels(&cx),
        });
        Ok(to_result(outcome).into())
    }
}
