//! The peers of a [`TestServer`]: agents, admins, fake extensions and browsers
//! (paired for a member or not), and teams, each made the way a real client
//! would make it, through the server's own API.

use std::sync::Arc;

use anyhow::Context;

use crate::server::TestServer;
use crate::{AdminClient, FakeExtension};

impl TestServer {
    /// An agent using `token`.
    pub fn agent(&self, token: &str) -> crate::FakeAgent {
        crate::FakeAgent::new(self.http.clone(), self.http_base(), token.to_string())
    }

    /// A new agent token of the default tenant, and an agent using it.
    pub async fn new_agent(&self) -> anyhow::Result<crate::FakeAgent> {
        let name = format!("agent-{}", rand::random::<u32>());
        let token = self
            .admin()
            .create_token(&name, latchkey_protocol::api::Role::Agent)
            .await?;
        Ok(self.agent(&token.token))
    }

    /// Pair a new device, connect it online, and serve it with `script`.
    pub async fn new_browser(
        &self,
        script: crate::Script,
    ) -> anyhow::Result<(String, crate::FakeBrowser)> {
        let mut ext = self.new_extension().await?;
        let grant = ext.pair().await?;
        let socket = ext.connect_online().await?;
        Ok((grant.device_id, crate::FakeBrowser::serve(socket, script)))
    }

    pub fn admin(&self) -> AdminClient {
        self.admin_with(&self.admin_token)
    }

    pub fn admin_with(&self, token: &str) -> AdminClient {
        AdminClient::new(self.http.clone(), self.http_base(), token.to_string())
    }

    /// Create a pairing link and a fake extension holding it.
    pub async fn new_extension(&self) -> anyhow::Result<FakeExtension> {
        let pairing = self.admin().create_pairing(None, None).await?;
        self.extension_from_link(&pairing.link)
    }

    /// A browser paired for member `member_id` through a link the bootstrap admin
    /// made: its extension (paired, not connected) and its device id.
    pub async fn paired_for(&self, member_id: &str) -> anyhow::Result<(FakeExtension, String)> {
        let link = self.admin().create_pairing_for(member_id).await?;
        let mut ext = self.extension_from_link(&link.link)?;
        let device = ext.pair().await?.device_id;
        Ok((ext, device))
    }

    /// For each of `members`, a browser paired for them, online, answering
    /// every call with success: the browsers and their device ids, in order.
    pub async fn online_browsers_for(
        &self,
        members: &[&str],
    ) -> anyhow::Result<(Vec<crate::FakeBrowser>, Vec<String>)> {
        let mut browsers = Vec::new();
        let mut devices = Vec::new();
        for member in members {
            let (ext, device) = self.paired_for(member).await?;
            let socket = ext.connect_online().await?;
            browsers.push(crate::FakeBrowser::serve(socket, Arc::new(|_| None)));
            devices.push(device);
        }
        Ok((browsers, devices))
    }

    /// A fake extension holding the pairing `link` (one made for a member, say).
    pub fn extension_from_link(&self, link: &str) -> anyhow::Result<FakeExtension> {
        FakeExtension::from_link(link, self.http.clone(), self.client_tls())
    }

    /// The id of the team the server bootstrapped (`default`), whose admin token
    /// [`Self::admin`] holds.
    pub async fn default_tenant_id(&self) -> anyhow::Result<String> {
        let store = self.state().store.as_ref();
        let tenant = store
            .tenant_by_name(latchkey_server::auth::bootstrap::DEFAULT_TENANT)
            .await?;
        Ok(tenant.context("the default tenant is gone")?.id)
    }

    /// Another team on this server: its first admin token.
    pub async fn new_tenant(&self, name: &str) -> anyhow::Result<String> {
        let store = self.state().store.as_ref();
        let created =
            latchkey_server::auth::bootstrap::create_tenant(store, name, self.clock().now_ms())
                .await?;
        Ok(created.admin_token)
    }
}
