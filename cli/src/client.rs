//! The HTTP client: bearer auth, JSON in and out, API errors to [`CliError`].

use std::path::Path;
use std::time::Duration;

use latchkey_protocol::ErrorCode;
use latchkey_protocol::error_code::ApiErrorBody;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::CliError;

#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl ApiClient {
    pub fn new(base: &str, token: &str, ca_cert: Option<&Path>) -> Result<Self, CliError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("latchkey-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| CliError::Config(format!("cannot read {}: {e}", path.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                CliError::Config(format!("{} is not a PEM certificate: {e}", path.display()))
            })?;
            builder = builder.tls_certs_merge([cert]);
        }
        let http = builder
            .build()
            .map_err(|e| CliError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T, CliError> {
        self.call_within(method, path, body, None).await
    }

    /// [`Self::call`] with its own time limit instead of the client's 60 s: a tool
    /// call waits as long as the gateway's deadline for it (up to 10 minutes).
    pub async fn call_within<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        limit: Option<Duration>,
    ) -> Result<T, CliError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(limit) = limit {
            request = request.timeout(limit);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CliError::Connection(without_url(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CliError::Connection(without_url(&e)))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| CliError::Connection(format!("unreadable answer: {e}")));
        }
        match serde_json::from_slice::<ApiErrorBody>(&bytes) {
            Ok(body) => Err(CliError::Api {
                code: body.error.code,
                message: body.error.message,
                data: body.error.data,
            }),
            Err(_) => Err(CliError::Api {
                code: if status.is_server_error() {
                    ErrorCode::Internal
                } else {
                    ErrorCode::InvalidRequest
                },
                message: format!("HTTP {status} without an error body"),
                data: None,
            }),
        }
    }
}

/// reqwest errors name the URL; ours never carry credentials, but keep messages short.
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<server>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
