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
    /// The profile the URL and token came from, named when the server cannot be
    /// reached (a wrong profile is the usual reason).
    profile: String,
}

/// `url` as an error message may show it: any `user:password@` part is
/// dropped, so a credential put in the URL never reaches the terminal or a log.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    if scheme.is_empty() {
        rest.to_string()
    } else {
        format!("{scheme}://{rest}")
    }
}

/// The server URL as given, checked before anything is sent: `http://` or
/// `https://` and a host.
pub fn check_url(url: &str) -> Result<(), CliError> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => {
            let url = shown_url(url);
            let hint = if url.contains("://") {
                String::new()
            } else {
                format!("; did you mean http://{url}?")
            };
            Err(CliError::Config(format!(
                "the server URL must start with http:// or https:// (got {url:?}{hint})"
            )))
        }
    }
}

/// No request body.
pub const NO_BODY: Option<&serde_json::Value> = None;

impl ApiClient {
    pub fn new(
        base: &str,
        token: &str,
        ca_cert: Option<&Path>,
        profile: &str,
    ) -> Result<Self, CliError> {
        check_url(base)?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            // latchkeyd closes a kept-alive connection idle for `setup_timeout_ms`
            // (5 s by default); a request sent on one as it closes is reset, so a
            // long-running command lets idle connections go well before then.
            .pool_idle_timeout(Duration::from_secs(2))
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
            profile: profile.to_string(),
        })
    }

    /// Why the server could not be reached, with the URL, the profile, and what
    /// to do about the usual causes.
    fn unreachable(&self, e: &reqwest::Error) -> CliError {
        let detail = without_url(e);
        let lower = detail.to_ascii_lowercase();
        let base = shown_url(&self.base);
        let hint = if lower.contains("connection refused") {
            format!(" Is latchkeyd running at {base}?")
        } else if base.starts_with("https://")
            && [
                "invalidcontenttype",
                "corrupt message",
                "wrong version number",
            ]
            .iter()
            .any(|m| lower.contains(m))
        {
            format!(
                " The server does not speak TLS there: try {}",
                base.replacen("https://", "http://", 1)
            )
        } else if lower.contains("unknownissuer") || lower.contains("invalid peer certificate") {
            " Its certificate is not trusted here: pass --ca-cert with the CA that signed it."
                .to_string()
        } else if e.is_timeout() {
            " It did not answer in time.".to_string()
        } else {
            String::new()
        };
        CliError::Connection(format!(
            "{base} (profile {:?}): {detail}.{hint}",
            self.profile
        ))
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
        let response = self.send(method, path, body, limit).await?;
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| CliError::Connection(format!("unreadable answer: {e}")))
    }

    /// A request whose successful answer is read as it arrives (an export); a
    /// refusal is decoded like any other.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        limit: Option<Duration>,
    ) -> Result<reqwest::Response, CliError> {
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
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
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

    /// The next piece of a response read with [`Self::send`].
    pub async fn chunk(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Option<bytes::Bytes>, CliError> {
        response.chunk().await.map_err(|e| self.unreachable(&e))
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

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_credential_in_the_url_is_never_shown() {
        assert_eq!(
            shown_url("https://bob:hunter2@gw.example:8443/x?a=b"),
            "https://gw.example:8443/x?a=b"
        );
        assert_eq!(shown_url("bob:hunter2@127.0.0.1:52800"), "127.0.0.1:52800");
        assert_eq!(
            shown_url("http://127.0.0.1:52800"),
            "http://127.0.0.1:52800"
        );
        assert_eq!(shown_url("http://h/p@q"), "http://h/p@q");
    }
}
