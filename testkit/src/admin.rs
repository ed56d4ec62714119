//! A thin client for the admin API, over the real HTTP endpoints.

use anyhow::{Context, bail};
use latchkey_protocol::api::{
    CreatePairingRequest, CreateTokenRequest, DeviceList, DeviceView, MemberView, PairingCreated,
    RevokeAllResult, Role, TokenCreated,
};
use reqwest::Method;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl AdminClient {
    pub fn new(http: reqwest::Client, base: String, token: String) -> Self {
        Self { http, base, token }
    }

    /// Any request; returns the status and the parsed JSON body (Null if none).
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).with_context(|| format!("non-JSON body: {text}"))?
        };
        Ok((status, value))
    }

    /// A `GET` whose answer is text (an audit export's JSON lines): the status
    /// and the body as it came.
    pub async fn text(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Ok((resp.status().as_u16(), resp.text().await?))
    }

    async fn ok<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<T> {
        let (status, value) = self.raw(method, path, body).await?;
        if !(200..300).contains(&status) {
            bail!("{path}: HTTP {status}: {value}");
        }
        Ok(serde_json::from_value(value)?)
    }

    pub async fn create_pairing(
        &self,
        label: Option<&str>,
        ttl_secs: Option<u64>,
    ) -> anyhow::Result<PairingCreated> {
        let body = CreatePairingRequest {
            label: label.map(str::to_string),
            ttl_secs,
            member_id: None,
        };
        self.ok(
            Method::POST,
            "/v1/admin/pairings",
            Some(serde_json::to_value(body)?),
        )
        .await
    }

    pub async fn devices(&self) -> anyhow::Result<Vec<DeviceView>> {
        let list: DeviceList = self.ok(Method::GET, "/v1/admin/devices", None).await?;
        Ok(list.devices)
    }

    pub async fn device(&self, id: &str) -> anyhow::Result<DeviceView> {
        self.ok(Method::GET, &format!("/v1/admin/devices/{id}"), None)
            .await
    }

    pub async fn revoke(&self, id: &str) -> anyhow::Result<DeviceView> {
        self.ok(Method::DELETE, &format!("/v1/admin/devices/{id}"), None)
            .await
    }

    pub async fn revoke_all(&self) -> anyhow::Result<RevokeAllResult> {
        self.ok(Method::POST, "/v1/admin/devices/revoke-all", None)
            .await
    }

    pub async fn create_token(&self, name: &str, role: Role) -> anyhow::Result<TokenCreated> {
        self.create_token_with_ttl(name, role, None).await
    }

    /// A token that expires `ttl_secs` after its creation.
    pub async fn create_token_with_ttl(
        &self,
        name: &str,
        role: Role,
        ttl_secs: Option<u64>,
    ) -> anyhow::Result<TokenCreated> {
        let body = CreateTokenRequest {
            name: name.to_string(),
            role,
            ttl_secs,
            member_id: None,
        };
        self.ok(
            Method::POST,
            "/v1/admin/tokens",
            Some(serde_json::to_value(body)?),
        )
        .await
    }
}

impl AdminClient {
    /// `GET /v1/admin/sessions`: every session of the team, as JSON.
    pub async fn sessions(&self) -> anyhow::Result<Value> {
        let (status, body) = self.raw(Method::GET, "/v1/admin/sessions", None).await?;
        if status != 200 {
            bail!("sessions: HTTP {status}: {body}");
        }
        Ok(body["sessions"].clone())
    }

    /// Alice and Bob, two members: what a test of who sees whose browsers needs.
    pub async fn alice_and_bob(&self) -> anyhow::Result<(MemberView, MemberView)> {
        let alice = self.add_member("Alice", "alice@example.com").await?;
        let bob = self.add_member("Bob", "bob@example.com").await?;
        Ok((alice, bob))
    }

    /// `POST /v1/admin/members`.
    pub async fn add_member(&self, name: &str, email: &str) -> anyhow::Result<MemberView> {
        let body = serde_json::json!({ "display_name": name, "email": email });
        self.ok(Method::POST, "/v1/admin/members", Some(body)).await
    }

    /// `POST /v1/admin/pairings` for a member.
    pub async fn create_pairing_for(&self, member_id: &str) -> anyhow::Result<PairingCreated> {
        let body = serde_json::json!({ "member_id": member_id });
        self.ok(Method::POST, "/v1/admin/pairings", Some(body))
            .await
    }

    /// The team's newest `limit` audit rows, each as its `fields` joined by spaces
    /// (`["action", "detail"]` → `"policy.set consent:deny"`).
    pub async fn audit_lines(&self, limit: u32, fields: &[&str]) -> anyhow::Result<Vec<String>> {
        let (status, body) = self
            .raw(Method::GET, &format!("/v1/admin/audit?limit={limit}"), None)
            .await?;
        if status != 200 {
            bail!("audit: HTTP {status}: {body}");
        }
        Ok(body["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                fields
                    .iter()
                    .map(|f| e[*f].as_str().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect())
    }

    /// Whether, within `deadline`, the newest 500 rows come to hold one whose
    /// action, actor, target, outcome and detail contain every one of `parts`.
    pub async fn audit_has(&self, deadline: std::time::Duration, parts: &[&str]) -> bool {
        crate::wait_until(deadline, || async {
            self.audit_lines(500, &AUDIT_FIELDS)
                .await
                .is_ok_and(|lines| lines.iter().any(|l| parts.iter().all(|p| l.contains(p))))
        })
        .await
    }

    /// A member token of `member_id` (their own credential, docs/people.md): its secret.
    pub async fn member_token(&self, member_id: &str) -> anyhow::Result<String> {
        let body = serde_json::json!({"name": "own", "role": "member", "member_id": member_id});
        let created: TokenCreated = self
            .ok(Method::POST, "/v1/admin/tokens", Some(body))
            .await?;
        Ok(created.token)
    }

    /// `DELETE /v1/admin/tokens/{id}`: status and body.
    pub async fn revoke_token(&self, id: &str) -> anyhow::Result<(u16, Value)> {
        self.raw(Method::DELETE, &format!("/v1/admin/tokens/{id}"), None)
            .await
    }
}

/// Every field of an audit row a test matches on.
pub const AUDIT_FIELDS: [&str; 5] = ["action", "actor", "target", "outcome", "detail"];
