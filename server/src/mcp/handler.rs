//! The MCP server itself: lists the tools and answers each call through the core's
//! session and call pipeline, as the agent principal the request authenticated as.

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::http::request::Parts;
use latchkey_protocol::tools::mcp::mcp_tool;
use latchkey_protocol::{ErrorBody, ErrorCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetSkillRequestParams,
    GetSkillResult, Implementation, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::choices::{Caller, Choices, MAX_KEY_CHARS};
use super::fill_form::{self, BROWSER_FILL_FORM};
use super::listing::{self, BROWSER_CLOSE, BROWSER_LIST, BROWSER_SELECT};
use super::{SESSION_KEY_HEADER, answers, skill};
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::core_error::CoreError;
use crate::sessions::calls::ToolCall;

/// One per node, cloned into every request's service.
#[derive(Clone)]
pub struct LatchkeyMcp {
    state: AppState,
    /// Built once: the catalogue does not change while the process runs.
    tools: Arc<Vec<Tool>>,
    choices: Arc<Choices>,
}

impl LatchkeyMcp {
    pub fn new(state: AppState) -> Self {
        Self {
            state,
            tools: Arc::new(listing::tools()),
            choices: Arc::new(Choices::default()),
        }
    }

    /// The server it serves, for the layer in front of the SDK to authenticate with.
    pub(super) fn state(&self) -> &AppState {
        &self.state
    }

    async fn call(
        &self,
        p: &Principal,
        caller: &Caller,
        name: &str,
        args: Map<String, Value>,
        cancelled: &CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let core = &self.state.core;
        let outcome = match name {
            BROWSER_LIST => crate::agent::browsers::browser_list(&self.state, p)
                .await
                .map(|list| answers::structured(json!(list)))
                .map_err(ErrorBody::from),
            BROWSER_SELECT => {
                let (browser_id, purpose) = select_args(&args)?;
                self.choices
                    .select(core, p, caller, &browser_id, purpose)
                    .await
                    .map(|s| {
                        answers::structured(json!({
                            "browser_id": s.device_id,
                            "session_id": s.session_id,
                        }))
                    })
                    .map_err(CoreError::into_body)
            }
            BROWSER_CLOSE => self
                .choices
                .close(core, p, caller)
                .await
                .map(|stopped| match stopped {
                    Some(result) => answers::structured(json!(result)),
                    None => {
                        CallToolResult::success(vec![ContentBlock::text("no session was open")])
                    }
                })
                .map_err(CoreError::into_body),
            BROWSER_FILL_FORM => self.fill_form(p, caller, &args, cancelled).await,
            _ => {
                let Some(named) = mcp_tool(name) else {
                    return Err(McpError::invalid_params(
                        format!("no tool named {name:?}: call tools/list"),
                        None,
                    ));
                };
                return Ok(self
                    .catalogue_call(p, caller, named.method, args, cancelled)
                    .await);
            }
        };
        Ok(outcome.unwrap_or_else(answers::failure))
    }

    /// A call of the catalogue's `method`, answered as [`Self::call`] answers it:
    /// a failure is a tool error, never a protocol error.
    pub(super) async fn catalogue_call(
        &self,
        p: &Principal,
        caller: &Caller,
        method: &str,
        args: Map<String, Value>,
        cancelled: &CancellationToken,
    ) -> CallToolResult {
        let max_image_bytes = self.state.config.mcp.max_image_bytes;
        self.raw_call(p, caller, method, args, cancelled)
            .await
            .map_or_else(answers::failure, |value| {
                answers::success(method, value, max_image_bytes)
            })
    }

    /// Each field of a form as its own catalogue call, in order, judged first
    /// as a whole ([`fill_form::plan`]).
    async fn fill_form(
        &self,
        p: &Principal,
        caller: &Caller,
        args: &Map<String, Value>,
        cancelled: &CancellationToken,
    ) -> Result<CallToolResult, ErrorBody> {
        let steps = fill_form::plan(args)?;
        if fill_form::needs_set_checked(&steps) {
            // Known before any field is set: the browser the call would open a
            // session on, or is on.
            let core = &self.state.core;
            let chosen = self
                .choices
                .session(core, p, caller)
                .await
                .map_err(CoreError::into_body)?;
            let features = core
                .link(&p.tenant_id, &chosen.device_id)
                .map(|link| link.features())
                .ok_or_else(|| CoreError::BrowserDisconnected.into_body())?;
            if !features.set_checked {
                return Err(fill_form::cannot_set_checked(&steps));
            }
        }
        let mut done = Vec::with_capacity(steps.len());
        for step in &steps {
            let result = self
                .raw_call(p, caller, step.method, step.params.clone(), cancelled)
                .await;
            match result {
                Ok(value) => done.push(value),
                Err(error) => return Ok(fill_form::answer(&steps, done, Some(error))),
            }
        }
        Ok(fill_form::answer(&steps, done, None))
    }

    /// A catalogue method on the caller's session, its result as the browser's JSON.
    async fn raw_call(
        &self,
        p: &Principal,
        caller: &Caller,
        method: &str,
        params: Map<String, Value>,
        cancelled: &CancellationToken,
    ) -> Result<Value, ErrorBody> {
        let core = &self.state.core;
        let call = ToolCall {
            method: method.to_string(),
            params,
            timeout_ms: None,
            limit: p.delegation.as_ref().map(|d| d.limit.clone()),
        };
        let work = self.choices.call(core, p, caller, call);
        // A client's `notifications/cancelled`, or its request going away, drops
        // the call: the pipeline cancels it on the browser (docs/protocol.md,
        // "Cancellation").
        let raw = tokio::select! {
            raw = work => raw.map_err(CoreError::into_body)?,
            () = cancelled.cancelled() => {
                return Err(ErrorBody::new(ErrorCode::Cancelled, "the client cancelled the call"));
            }
        };
        serde_json::from_str(raw.get()).map_err(|_| {
            ErrorBody::new(ErrorCode::ProtocolError, "the browser's result is not JSON")
        })
    }
}

fn select_args(args: &Map<String, Value>) -> Result<(String, Option<String>), McpError> {
    let browser_id = args
        .get("browser_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| McpError::invalid_params("browser_id (a string) is required", None))?;
    let purpose = match args.get("purpose") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(McpError::invalid_params("purpose must be a string", None)),
    };
    Ok((browser_id.to_string(), purpose))
}

/// The principal the request authenticated as, and which of its clients it is.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<(Principal, Caller), McpError> {
    let parts = context
        .extensions
        .get::<Parts>()
        .ok_or_else(|| McpError::internal_error("the request's headers are missing", None))?;
    caller_in(parts)
}

/// [`caller_of`] from the request's head: the principal [`super::auth`] put there,
/// and the session key header, checked.
pub(super) fn caller_in(parts: &Parts) -> Result<(Principal, Caller), McpError> {
    let p = parts
        .extensions
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request is not authenticated", None))?;
    let caller = caller_for(&p, &parts.headers)?;
    Ok((p, caller))
}

/// Which of `p`'s clients the request comes from: its session key header, checked.
pub(super) fn caller_for(p: &Principal, headers: &HeaderMap) -> Result<Caller, McpError> {
    let key = match headers.get(SESSION_KEY_HEADER) {
        None => "",
        Some(value) => value
            .to_str()
            .ok()
            .filter(|k| k.len() <= MAX_KEY_CHARS && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                McpError::invalid_request(
                    format!(
                        "{SESSION_KEY_HEADER} must be 1..={MAX_KEY_CHARS} visible ASCII characters"
                    ),
                    None,
                )
            })?,
    };
    Ok(Caller::new(p, key))
}

impl ServerHandler for LatchkeyMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_skills()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("latchkey", env!("CARGO_PKG_VERSION")))
            .with_instructions(listing::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(skill::list_resources())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        skill::read_resource(&request.uri).map(ReadResourceResult::into)
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        Ok(skill::list_skills())
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        skill::get_skill(&request.uri)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let (p, caller) = caller_of(&context)?;
        let args = request.arguments.unwrap_or_default();
        let answer = self
            .call(&p, &caller, &request.name, args, &context.ct)
            .await?;
        Ok(answer.into())
    }
}
