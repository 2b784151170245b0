//! The fixture handlers and the app that serves them.

use crate::surface::{CEDAR_SCHEMA, Handlers, PERMISSIONS, TOOLS, conformance};
use std::sync::Arc;

use audit::Audit;
use authz::{Engine, Facts, PolicyFile, Snapshot};
use server::app::ServedTool;
use server::server::Served;
use tool_api::{CallContext, Content, Encoded, ErrorCode, JsonObject, NoOutput, Reply, ToolError};

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn text(t: &str) -> Reply<NoOutput> {
    Reply::rendered(NoOutput {}, t.to_string())
}

/// The fixture handlers.
#[derive(Debug, Clone, Copy)]
pub struct Fixtures;

impl conformance::ConformanceHandlers for Fixtures {
    async fn test_simple_text(
        &self,
        _call: tool_api::Authorized<conformance::TestSimpleTextArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        Ok(text("This is a simple text response for testing."))
    }

    async fn test_image_content(
        &self,
        _call: tool_api::Authorized<conformance::TestImageContentArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        let mut r = text("A 1x1 red PNG.");
        r.extra.push(Content::image(PNG.to_string(), "image/png"));
        Ok(r)
    }

    async fn test_audio_content(
        &self,
        _call: tool_api::Authorized<conformance::TestAudioContentArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        let mut r = text("An empty WAV file.");
        r.extra.push(Content::Audio {
            data: WAV.to_string(),
            mime: "audio/wav".into(),
        });
        Ok(r)
    }

    async fn test_embedded_resource(
        &self,
        _call: tool_api::Authorized<conformance::TestEmbeddedResourceArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        let mut r = text("An embedded resource.");
        r.extra.push(Content::Resource {
            uri: "test://embedded-resource".into(),
            mime: "text/plain".into(),
            text: "This is an embedded resource content.".into(),
        });
        Ok(r)
    }

    async fn test_multiple_content_types(
        &self,
        _call: tool_api::Authorized<conformance::TestMultipleContentTypesArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        let mut r = text("Multiple content types test:");
        r.extra.push(Content::image(PNG.to_string(), "image/png"));
        r.extra.push(Content::Resource {
            uri: "test://mixed-content-resource".into(),
            mime: "application/json".into(),
            text: r#"{"test":"data","value":123}"#.into(),
        });
        Ok(r)
    }

    async fn test_error_handling(
        &self,
        _call: tool_api::Authorized<conformance::TestErrorHandlingArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        Err(ToolError::new(
            ErrorCode::Internal,
            "This tool intentionally returns an error for testing",
        ))
    }
}

/// The fixture surface, ready to serve.
pub struct FixtureApp {
    tools: Vec<ServedTool>,
    engine: Arc<Engine>,
    facts: Facts,
    handlers: Handlers<Fixtures>,
    audit: Audit,
}

impl FixtureApp {
    /// Loads the fixture policies (validated against the generated Cedar schema) with every
    /// permission on.
    pub fn new() -> Result<FixtureApp, String> {
        let policies = [PolicyFile {
            name: "tests/conformance/rules/fixtures.cedar".into(),
            text: include_str!("../rules/fixtures.cedar").into(),
        }];
        let engine = Engine::load(CEDAR_SCHEMA, &policies, ErrorCode::DENIALS)
            .map_err(|e| authz::LoadError::lines(&e))?;
        let snapshot = Snapshot {
            platform: tool_api::Platform::current().name(),
            read_only: false,
            permissions: PERMISSIONS.iter().map(|p| (p.name, true)).collect(),
        };
        let facts = engine.facts(&snapshot).map_err(|d| d.to_string())?;
        Ok(FixtureApp {
            tools: server::app::served_tools_of(TOOLS)?,
            engine: Arc::new(engine),
            facts,
            handlers: Handlers {
                conformance: Fixtures,
            },
            audit: Audit::disabled(),
        })
    }
}

impl Served for FixtureApp {
    fn tools(&self) -> &[ServedTool] {
        &self.tools
    }

    fn published(&self, connector: &str) -> Vec<&'static str> {
        TOOLS
            .iter()
            .filter(|t| t.connector == connector)
            .map(|t| t.name)
            .collect()
    }

    fn call_context(&self, connector: &str) -> Result<CallContext, ToolError> {
        let gate = authz::Gate::new(self.engine.clone(), connector, &self.facts)?;
        Ok(CallContext::new(gate))
    }

    fn dispatch<'a>(
        &'a self,
        connector: &'a str,
        cx: &'a CallContext,
        name: &'a str,
        arguments: JsonObject,
    ) -> impl std::future::Future<Output = Result<Encoded, ToolError>> + Send + 'a {
        self.handlers.dispatch(connector, cx, name, arguments)
    }

    fn audit(&self) -> &Audit {
        &self.audit
    }
}
