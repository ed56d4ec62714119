//! Single sign-on to the console (docs/console.md, "Single sign-on"): OpenID
//! Connect's authorization code flow with PKCE against the providers the
//! operator configured, each for one team.
//!
//! latchkeyd is the relying party. It never sees a password; it trusts an ID
//! token only after checking the provider's signature, the issuer, the audience,
//! the expiry and the nonce it sent, and it keeps nothing of the provider's
//! tokens: the sign-in is a console sign-in row naming the member, like a token
//! sign-in's.

pub mod config;
mod flow;
mod identity;

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_protocol::ErrorCode;
use openidconnect::core::{CoreClient, CoreProviderMetadata};
use openidconnect::{
    ClientId, ClientSecret, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest,
    HttpResponse, IssuerUrl, RedirectUrl,
};

pub use flow::{callback, start};

use self::config::SsoProvider;
use crate::api_error::ApiError;

/// How long a provider's discovery document and keys are used before they are
/// read again (a provider rotating its keys is followed within this).
const DISCOVERY_TTL: Duration = Duration::from_secs(300);
/// How long one request to a provider may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from a provider (discovery, keys, token).
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// A client for one provider, with its redirect address set.
type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The configured providers, with what was last read of each.
#[derive(Debug)]
pub struct Sso {
    providers: Vec<Provider>,
    /// Talks to providers: no redirects followed, every request timed out.
    http: Option<Fetcher>,
}

#[derive(Debug)]
struct Provider {
    config: SsoProvider,
    /// The discovery document and keys, and when they were read.
    discovered: tokio::sync::Mutex<Option<(Instant, Arc<CoreProviderMetadata>)>>,
}

/// What the sign-in page offers: a provider's id and button label.
#[derive(Debug, Clone)]
pub struct Offered {
    pub id: String,
    pub label: String,
}

impl Sso {
    pub fn new(providers: &[SsoProvider]) -> Self {
        // Made only when there is a provider to talk to: nothing at start-up
        // for a gateway without single sign-on.
        let http = (!providers.is_empty())
            .then(|| {
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(REQUEST_TIMEOUT)
                    .build()
                    .map_err(|e| tracing::error!(error = %e, "single sign-on has no HTTP client"))
                    .ok()
                    .map(Fetcher)
            })
            .flatten();
        Self {
            providers: providers
                .iter()
                .map(|p| Provider {
                    config: p.clone(),
                    discovered: tokio::sync::Mutex::new(None),
                })
                .collect(),
            http,
        }
    }

    /// The providers the sign-in page offers, in configuration order.
    pub fn offered(&self) -> Vec<Offered> {
        self.providers
            .iter()
            .map(|p| Offered {
                id: p.config.id.clone(),
                label: p.config.label.clone(),
            })
            .collect()
    }

    fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.config.id == id)
    }

    /// A client for `provider`, redirecting back to `redirect`, from the
    /// provider's discovery document (read again when older than
    /// [`DISCOVERY_TTL`] or when `fresh`).
    async fn client(
        &self,
        provider: &Provider,
        redirect: &str,
        fresh: bool,
    ) -> Result<Client, ApiError> {
        let metadata = self.metadata(provider, fresh).await?;
        let secret = provider.config.secret().map_err(|e| {
            tracing::error!(provider = %provider.config.id, error = %e, "cannot read client_secret_file");
            failed("the client secret cannot be read; see the server log")
        })?;
        let redirect = RedirectUrl::new(redirect.to_string())
            .map_err(|_| failed("the console's own address does not parse"))?;
        Ok(CoreClient::from_provider_metadata(
            (*metadata).clone(),
            ClientId::new(provider.config.client_id.clone()),
            secret.map(ClientSecret::new),
        )
        .set_redirect_uri(redirect))
    }

    async fn metadata(
        &self,
        provider: &Provider,
        fresh: bool,
    ) -> Result<Arc<CoreProviderMetadata>, ApiError> {
        let mut cached = provider.discovered.lock().await;
        if let Some((at, metadata)) = cached.as_ref()
            && !fresh
            && at.elapsed() < DISCOVERY_TTL
        {
            return Ok(metadata.clone());
        }
        let issuer = IssuerUrl::new(provider.config.issuer.clone())
            .map_err(|_| failed("the issuer URL does not parse"))?;
        let http = self.http()?;
        let metadata = CoreProviderMetadata::discover_async(issuer, http)
            .await
            .map_err(|e| {
                tracing::warn!(provider = %provider.config.id, error = %error_chain(&e), "OpenID discovery failed");
                failed("its discovery document or keys could not be read")
            })?;
        let metadata = Arc::new(metadata);
        *cached = Some((Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    fn http(&self) -> Result<&Fetcher, ApiError> {
        self.http
            .as_ref()
            .ok_or_else(|| failed("latchkeyd has no HTTP client; see the server log"))
    }
}

/// `identity_provider_failed`, saying what went wrong with the provider.
fn failed(what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::IdentityProviderFailed,
        format!("Single sign-on failed: {what}. Try again, or sign in with a token."),
    )
}

/// An error and its causes on one line, for the log (never shown to the person:
/// a provider's answer may echo what it was sent).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Why a request to a provider failed.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("answer larger than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    #[error("answer not representable: {0}")]
    Answer(#[from] axum::http::Error),
}

/// Requests to a provider through our HTTP client (the crate's own would be a
/// second reqwest): no redirects, timed out, the answer bounded in size. A type
/// of its own, so the futures it makes are `Send` for any borrow.
#[derive(Debug, Clone)]
struct Fetcher(reqwest::Client);

impl<'c> openidconnect::AsyncHttpClient<'c> for Fetcher {
    type Error = FetchError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<HttpResponse, FetchError>> + Send + 'c>,
    >;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(fetch(&self.0, request))
    }
}

async fn fetch(http: &reqwest::Client, request: HttpRequest) -> Result<HttpResponse, FetchError> {
    let (parts, body) = request.into_parts();
    let mut response = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let mut answer = axum::http::Response::builder().status(response.status());
    if let Some(headers) = answer.headers_mut() {
        *headers = response.headers().clone();
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(FetchError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(answer.body(bytes)?)
}
