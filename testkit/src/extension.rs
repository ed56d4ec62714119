//! [`FakeExtension`]: the extension side of the protocol, over real sockets. It pairs
//! with a real link, renews, connects with the `bsk-auth.` subprotocol and an extension
//! Origin, and speaks frames; tests script the rest.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::authorize::AuthorizeGrant;
use latchkey_protocol::handshake::{BrowserInfo, HandshakeParams, HandshakeResult};
use latchkey_protocol::{Frame, RequestFrame, methods};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// The Origin a real extension sends (32 characters a–p).
pub const TEST_EXTENSION_ORIGIN: &str = "chrome-extension://abcdefghijklmnopabcdefghijklmnop";

/// A fresh 256-bit credential, as the extension makes `next_token`.
pub fn new_token() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// An HTTP answer as the extension sees it.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl HttpAnswer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// `Retry-After`, if present.
    pub fn retry_after(&self) -> Option<&str> {
        self.headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
    }

    /// bsk's answer while the authorization store cannot take a write: 503
    /// `authorization_store_busy`, `Retry-After: 1` (docs/protocol.md, "Pairing and renewal").
    pub fn assert_store_busy(&self) {
        assert_eq!(self.status, 503, "{}", self.body);
        assert_eq!(
            self.json(),
            serde_json::json!({"error": "authorization_store_busy"})
        );
        assert_eq!(self.retry_after(), Some("1"));
    }
}

#[derive(Debug, Clone)]
pub struct FakeExtension {
    /// `wss://host/extension` (the link without its fragment).
    pub ws_url: String,
    /// `https://host/extension/authorize`.
    pub authorize_url: String,
    /// The pairing secret from the link's fragment.
    pub pairing_secret: String,
    pub device_id: Option<String>,
    /// The current device token.
    pub token: Option<String>,
    pub origin: String,
    /// Connect from this local address (e.g. 127.0.0.2, to look like another client).
    pub local_addr: Option<std::net::IpAddr>,
    /// The HTTP client `/authorize` goes through (bind it to another local address
    /// to look like another client).
    pub http: reqwest::Client,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl FakeExtension {
    /// Parse `wss://HOST/PATH#SECRET` as the extension does (docs/protocol.md, "Pairing links").
    pub fn from_link(
        link: &str,
        http: reqwest::Client,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> anyhow::Result<Self> {
        let (ws_url, secret) = link.split_once('#').context("link without a fragment")?;
        let http_url = if let Some(rest) = ws_url.strip_prefix("wss://") {
            format!("https://{rest}")
        } else if let Some(rest) = ws_url.strip_prefix("ws://") {
            format!("http://{rest}")
        } else {
            bail!("link scheme must be ws or wss");
        };
        Ok(Self {
            ws_url: ws_url.to_string(),
            authorize_url: format!("{}/authorize", http_url.trim_end_matches('/')),
            pairing_secret: secret.to_string(),
            device_id: None,
            token: None,
            origin: TEST_EXTENSION_ORIGIN.to_string(),
            local_addr: None,
            http,
            tls,
        })
    }

    /// Dial `ws_url` over `tls` from now on: a proxy in front of the server this
    /// extension paired with directly (pairing many through a proxy would meet
    /// the proxy's own per-address request limits).
    pub fn via(&mut self, ws_url: &str, tls: Option<Arc<rustls::ClientConfig>>) {
        self.ws_url = ws_url.to_string();
        self.tls = tls;
    }

    /// POST /authorize with any bearer and body, returning what came back.
    pub async fn authorize_raw(
        &self,
        bearer: Option<&str>,
        body: &Value,
    ) -> anyhow::Result<HttpAnswer> {
        let mut req = self
            .http
            .post(&self.authorize_url)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(b) = bearer {
            req = req.header("authorization", format!("Bearer {b}"));
        }
        let resp = req.send().await?;
        Ok(HttpAnswer {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: resp.text().await?,
        })
    }

    /// Redeem the pairing secret with `next_token`; on 200 the token becomes current.
    pub async fn pair_with(
        &mut self,
        next_token: &str,
    ) -> anyhow::Result<Result<AuthorizeGrant, HttpAnswer>> {
        let body =
            json!({"action": "pair", "next_token": next_token, "label": "Chrome · BrowserSkill"});
        let secret = self.pairing_secret.clone();
        let answer = self.authorize_raw(Some(&secret), &body).await?;
        if answer.status != 200 {
            return Ok(Err(answer));
        }
        let grant: AuthorizeGrant = serde_json::from_str(&answer.body)?;
        self.device_id = Some(grant.device_id.clone());
        self.token = Some(next_token.to_string());
        Ok(Ok(grant))
    }

    /// Pair with a fresh token; fails unless the server answers 200.
    pub async fn pair(&mut self) -> anyhow::Result<AuthorizeGrant> {
        match self.pair_with(&new_token()).await? {
            Ok(g) => Ok(g),
            Err(a) => bail!("pair refused: HTTP {} {}", a.status, a.body),
        }
    }

    /// Renew from `bearer` to `next`; does not change this extension's state.
    pub async fn renew_raw(&self, bearer: &str, next: &str) -> anyhow::Result<HttpAnswer> {
        self.authorize_raw(
            Some(bearer),
            &json!({"action": "renew", "next_token": next}),
        )
        .await
    }

    /// Rotate the current token; on 200 the new token becomes current.
    pub async fn renew(&mut self) -> anyhow::Result<AuthorizeGrant> {
        let current = self.token.clone().context("not paired")?;
        let next = new_token();
        let answer = self.renew_raw(&current, &next).await?;
        if answer.status != 200 {
            bail!("renew refused: HTTP {} {}", answer.status, answer.body);
        }
        self.token = Some(next);
        Ok(serde_json::from_str(&answer.body)?)
    }

    /// Rotate to `next`, as the extension does: it keeps `next` until an answer
    /// arrives, so a retry after a lost answer is the same request (answered
    /// as a retry of the renewal already made). On 200 `next` becomes current.
    pub async fn renew_to(&mut self, next: &str) -> anyhow::Result<HttpAnswer> {
        let current = self.token.clone().context("not paired")?;
        let answer = self.renew_raw(&current, next).await?;
        if answer.status == 200 {
            self.token = Some(next.to_string());
        }
        Ok(answer)
    }

    /// Open the WebSocket with the current token (no handshake yet).
    pub async fn connect(&self) -> anyhow::Result<Result<ExtensionSocket, HttpAnswer>> {
        let token = self.token.clone().context("not paired")?;
        let protocol = format!("{}{token}", methods::AUTH_SUBPROTOCOL_PREFIX);
        self.connect_with(
            &[
                ("sec-websocket-protocol", protocol.as_str()),
                ("origin", self.origin.as_str()),
            ],
            None,
        )
        .await
    }

    /// Open the WebSocket with exactly these extra headers (for refusal tests).
    pub async fn connect_with(
        &self,
        headers: &[(&str, &str)],
        url: Option<&str>,
    ) -> anyhow::Result<Result<ExtensionSocket, HttpAnswer>> {
        let mut request = url.unwrap_or(&self.ws_url).into_client_request()?;
        for (name, value) in headers {
            request.headers_mut().append(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes())?,
                HeaderValue::from_str(value)?,
            );
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(64 << 20))
            .max_frame_size(Some(16 << 20));
        let connector = self.tls.clone().map(Connector::Rustls);
        let attempt = match self.local_addr {
            None => {
                tokio_tungstenite::connect_async_tls_with_config(
                    request,
                    Some(config),
                    // As Chromium does: no Nagle delay on small frames.
                    true,
                    connector,
                )
                .await
            }
            Some(local) => {
                let stream = connect_from(local, request.uri()).await?;
                tokio_tungstenite::client_async_tls_with_config(
                    request,
                    stream,
                    Some(config),
                    connector,
                )
                .await
            }
        };
        match attempt {
            Ok((ws, response)) => {
                let protocol = response
                    .headers()
                    .get("sec-websocket-protocol")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                Ok(Ok(ExtensionSocket { ws, protocol }))
            }
            Err(tungstenite::Error::Http(response)) => Ok(Err(HttpAnswer {
                status: response.status().as_u16(),
                headers: response.headers().clone(),
                body: response
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
            })),
            Err(e) => Err(e.into()),
        }
    }

    /// Connect and complete the handshake; fails on any refusal.
    pub async fn connect_online(&self) -> anyhow::Result<ExtensionSocket> {
        let mut socket = match self.connect().await? {
            Ok(s) => s,
            Err(a) => bail!("upgrade refused: HTTP {} {}", a.status, a.body),
        };
        socket.handshake().await?;
        Ok(socket)
    }
}

/// A TCP connection to the URI's host and port, from `local`.
async fn connect_from(
    local: std::net::IpAddr,
    uri: &tungstenite::http::Uri,
) -> anyhow::Result<TcpStream> {
    let host = uri
        .host()
        .context("URL without a host")?
        .trim_matches(['[', ']']);
    let secure = uri.scheme_str() == Some("wss");
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let target = tokio::net::lookup_host((host, port))
        .await?
        .find(|a| a.is_ipv4() == local.is_ipv4())
        .context("no address of the right family")?;
    let socket = if local.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.bind(std::net::SocketAddr::new(local, 0))?;
    let stream = socket.connect(target).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The default handshake params of a 1.0 extension.
pub fn handshake_params() -> HandshakeParams {
    HandshakeParams {
        client: methods::HANDSHAKE_CLIENT_NAME.to_string(),
        version: "0.4.2".to_string(),
        protocol_version: "1.0".to_string(),
        instance_id: "a1b2c3d4".to_string(),
        browser: BrowserInfo {
            name: "chromium".to_string(),
            version: "156.0".to_string(),
        },
        label: String::new(),
        min_compatible_peer: Some("0.0.0".to_string()),
        min_compatible_protocol: Some("1.0".to_string()),
        audit_enabled: None,
        latchkey_features: None,
    }
}

/// How a socket ended, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// A Close frame with this code.
    Closed(u16),
    /// Closed without a Close frame.
    Dropped,
}

/// An open extension socket.
#[derive(Debug)]
pub struct ExtensionSocket {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The subprotocol the server echoed in its 101.
    pub protocol: Option<String>,
}

/// The longest any single read waits in tests before giving up.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);

impl ExtensionSocket {
    pub async fn send_frame(&mut self, frame: &Frame) -> anyhow::Result<()> {
        self.ws.send(Message::text(frame.to_text())).await?;
        Ok(())
    }

    pub async fn send_text(&mut self, text: &str) -> anyhow::Result<()> {
        self.ws.send(Message::text(text.to_string())).await?;
        Ok(())
    }

    /// The next text frame, or an error if the socket ends first.
    pub async fn next_frame(&mut self) -> anyhow::Result<Frame> {
        loop {
            let msg = tokio::time::timeout(READ_DEADLINE, self.ws.next())
                .await
                .context("no frame within the read deadline")?
                .context("socket ended")??;
            match msg {
                Message::Text(t) => return Ok(Frame::parse(t.as_str())?),
                Message::Close(c) => bail!("socket closed: {c:?}"),
                _ => continue,
            }
        }
    }

    /// Send a handshake with these params and return the reply frame.
    pub async fn handshake_with(&mut self, params: &HandshakeParams) -> anyhow::Result<Frame> {
        let request = RequestFrame::new(
            "hs-0000test",
            methods::SYSTEM_HANDSHAKE,
            Some(serde_json::to_value(params)?),
        );
        self.send_frame(&Frame::Request(request)).await?;
        self.next_frame().await
    }

    pub async fn handshake(&mut self) -> anyhow::Result<HandshakeResult> {
        match self.handshake_with(&handshake_params()).await? {
            Frame::Success(s) => Ok(serde_json::from_value(s.result)?),
            other => bail!("handshake refused: {other:?}"),
        }
    }

    pub async fn heartbeat(&mut self) -> anyhow::Result<()> {
        self.send_text(r#"{"event":"system.heartbeat","payload":{}}"#)
            .await
    }

    /// Read until the socket ends; returns how (within `deadline`).
    pub async fn ended(&mut self, deadline: Duration) -> anyhow::Result<Ended> {
        read_to_end(&mut self.ws, deadline, |_| {}).await
    }
}

/// Read `ws` until it ends, handing every text message to `on_text`; how it ended
/// (within `deadline`).
pub(crate) async fn read_to_end<S>(
    ws: &mut S,
    deadline: Duration,
    mut on_text: impl FnMut(&str),
) -> anyhow::Result<Ended>
where
    S: futures_util::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let read = async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) => return Ended::Dropped,
                Some(Ok(Message::Close(Some(frame)))) => return Ended::Closed(frame.code.into()),
                Some(Ok(Message::Close(None))) => return Ended::Dropped,
                Some(Ok(Message::Text(t))) => on_text(t.as_str()),
                Some(Ok(_)) => continue,
            }
        }
    };
    tokio::time::timeout(deadline, read)
        .await
        .context("socket still open at the deadline")
}

impl crate::TestServer {
    /// A paired, online browser whose extension lists Latchkey's `features`
    /// in its handshake (docs/protocol.md, "Latchkey's additions").
    pub async fn new_browser_with_features(
        &self,
        script: crate::Script,
        features: &[&str],
    ) -> anyhow::Result<(String, crate::FakeBrowser)> {
        let mut ext = self.new_extension().await?;
        let grant = ext.pair().await?;
        let mut socket = match ext.connect().await? {
            Ok(s) => s,
            Err(a) => anyhow::bail!("upgrade refused: HTTP {} {}", a.status, a.body),
        };
        let mut params = crate::extension::handshake_params();
        // None listed: the key is absent, as from a contract-only extension.
        params.latchkey_features =
            (!features.is_empty()).then(|| features.iter().map(|f| f.to_string()).collect());
        match socket.handshake_with(&params).await? {
            latchkey_protocol::Frame::Success(_) => {}
            other => anyhow::bail!("handshake refused: {other:?}"),
        }
        Ok((grant.device_id, crate::FakeBrowser::serve(socket, script)))
    }
}

/// A browser online with a script, an agent, and the agent's session on it:
/// what most session tests start from.
#[derive(Debug)]
pub struct SessionOnBrowser {
    pub device: String,
    pub browser: crate::FakeBrowser,
    pub agent: crate::FakeAgent,
    pub session: String,
}

impl crate::TestServer {
    /// A new browser served by `script`, a new agent, and a session of that
    /// agent on that browser.
    pub async fn session_on_new_browser(
        &self,
        script: crate::Script,
    ) -> anyhow::Result<SessionOnBrowser> {
        let (device, browser) = self.new_browser(script).await?;
        let agent = self.new_agent().await?;
        let session = agent.start(Some(&device)).await?.id;
        Ok(SessionOnBrowser {
            device,
            browser,
            agent,
            session,
        })
    }
}
