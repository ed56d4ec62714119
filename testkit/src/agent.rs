//! [`FakeAgent`]: an agent over the real HTTP API, with one API token.

use anyhow::bail;
use latchkey_protocol::agent::{
    BrowserList, CallRequest, SessionList, SessionView, StartSessionRequest, StopSessionResult,
};
use reqwest::Method;
use serde_json::Value;

/// A call's outcome as the agent sees it: the result, or the error body's code,
/// message and data, with the HTTP status.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub status: u16,
    pub body: Value,
}

impl CallOutcome {
    pub fn is_ok(&self) -> bool {
        self.status == 200
    }

    pub fn result(&self) -> &Value {
        &self.body["result"]
    }

    /// The error code (`""` on success).
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    pub fn reason(&self) -> &str {
        self.body["error"]["data"]["reason"]
            .as_str()
            .unwrap_or_default()
    }
}

/// A session's server-sent event stream, read over the real HTTP connection.
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    /// Read `response` (a `text/event-stream` answer) event by event.
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event as `(name, data)`; `None` once the stream has ended. Fails if
    /// nothing arrives within the read deadline.
    pub async fn next(&mut self) -> anyhow::Result<Option<(String, Value)>> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let name = block.lines().find_map(|l| l.strip_prefix("event: "));
                let data = block.lines().find_map(|l| l.strip_prefix("data: "));
                // Keep-alive comments have neither.
                if let Some(data) = data {
                    let name = name.unwrap_or("message").to_string();
                    return Ok(Some((name, serde_json::from_str(data)?)));
                }
                continue;
            }
            let chunk =
                tokio::time::timeout(crate::extension::READ_DEADLINE, self.response.chunk())
                    .await
                    .map_err(|_| anyhow::anyhow!("no event within the read deadline"))??;
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return Ok(None),
            }
        }
    }

    /// The next event; fails if none arrives within the read deadline or the
    /// stream ends first.
    pub async fn next_event(&mut self) -> anyhow::Result<(String, Value)> {
        self.next()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the event stream ended"))
    }
}

#[derive(Debug, Clone)]
pub struct FakeAgent {
    http: reqwest::Client,
    base: String,
    pub token: String,
}

impl FakeAgent {
    pub fn new(http: reqwest::Client, base: String, token: String) -> Self {
        Self { http, base, token }
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<CallOutcome> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)?
        };
        Ok(CallOutcome { status, body })
    }

    /// Open `GET /v1/sessions/{session}/events`; fails unless it answers 200.
    pub async fn events(&self, session: &str) -> anyhow::Result<EventStream> {
        let response = self
            .http
            .get(format!("{}/v1/sessions/{session}/events", self.base))
            .bearer_auth(&self.token)
            .send()
            .await?;
        if response.status() != 200 {
            bail!("events: HTTP {}", response.status());
        }
        Ok(EventStream {
            response,
            buffer: String::new(),
        })
    }

    pub async fn browsers(&self) -> anyhow::Result<BrowserList> {
        let r = self.request(Method::GET, "/v1/browsers", None).await?;
        if r.status != 200 {
            bail!("browsers: {} {}", r.status, r.body);
        }
        Ok(serde_json::from_value(r.body)?)
    }

    /// Start a session; the raw outcome (tests check refusals too).
    pub async fn start_raw(&self, req: &StartSessionRequest) -> anyhow::Result<CallOutcome> {
        self.request(
            Method::POST,
            "/v1/sessions",
            Some(&serde_json::to_value(req)?),
        )
        .await
    }

    /// Start a session on `browser_id` (or the only browser); the raw outcome.
    pub async fn try_start(&self, browser_id: Option<&str>) -> anyhow::Result<CallOutcome> {
        self.start_raw(&StartSessionRequest {
            browser_id: browser_id.map(str::to_string),
            ..StartSessionRequest::default()
        })
        .await
    }

    pub async fn start(&self, browser_id: Option<&str>) -> anyhow::Result<SessionView> {
        let req = StartSessionRequest {
            browser_id: browser_id.map(str::to_string),
            ..StartSessionRequest::default()
        };
        let r = self.start_raw(&req).await?;
        if r.status != 201 {
            bail!("start session: {} {}", r.status, r.body);
        }
        Ok(serde_json::from_value(r.body)?)
    }

    pub async fn sessions(&self) -> anyhow::Result<SessionList> {
        let r = self.request(Method::GET, "/v1/sessions", None).await?;
        Ok(serde_json::from_value(r.body)?)
    }

    pub async fn stop_raw(&self, session: &str) -> anyhow::Result<CallOutcome> {
        self.request(Method::DELETE, &format!("/v1/sessions/{session}"), None)
            .await
    }

    pub async fn stop(&self, session: &str) -> anyhow::Result<StopSessionResult> {
        let r = self.stop_raw(session).await?;
        if r.status != 200 {
            bail!("stop session: {} {}", r.status, r.body);
        }
        Ok(serde_json::from_value(r.body)?)
    }

    pub async fn call(
        &self,
        session: &str,
        method: &str,
        params: Value,
    ) -> anyhow::Result<CallOutcome> {
        self.call_with(
            session,
            &CallRequest {
                method: method.to_string(),
                params: Some(params),
                timeout_ms: None,
            },
        )
        .await
    }

    /// Start a call in the background (it is waited for later, or never).
    pub fn spawn_call(
        &self,
        session: &str,
        method: &str,
        params: Value,
    ) -> tokio::task::JoinHandle<CallOutcome> {
        let (agent, session, method) = (self.clone(), session.to_string(), method.to_string());
        tokio::spawn(async move {
            // A transport failure becomes status 0 with code `transport`, so the test's
            // own assertion reports it.
            agent.call(&session, &method, params).await.unwrap_or_else(|e| CallOutcome {
                status: 0,
                body: serde_json::json!({"error": {"code": "transport", "message": e.to_string()}}),
            })
        })
    }

    pub async fn call_with(
        &self,
        session: &str,
        call: &CallRequest,
    ) -> anyhow::Result<CallOutcome> {
        self.request(
            Method::POST,
            &format!("/v1/sessions/{session}/calls"),
            Some(&serde_json::to_value(call)?),
        )
        .await
    }
}
