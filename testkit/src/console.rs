//! A browser-less client for the web console (docs/console.md): it signs in with
//! a token, keeps the cookie, reads pages and posts their forms as a browser
//! would (a same-origin form post), so tests can check what the pages say and
//! what the console refuses.

use anyhow::Context;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, LOCATION, SET_COOKIE};

/// One answer: status, headers and the body's text.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    /// Where a redirect points.
    pub fn location(&self) -> Option<&str> {
        self.headers.get(LOCATION)?.to_str().ok()
    }

    /// The CSRF token in the page's forms.
    pub fn csrf(&self) -> Option<String> {
        let at = self.body.find(r#"name="csrf" value=""#)? + r#"name="csrf" value=""#.len();
        let rest = &self.body[at..];
        Some(rest[..rest.find('"')?].to_owned())
    }
}

#[derive(Debug, Clone)]
pub struct ConsoleClient {
    http: reqwest::Client,
    base: String,
    /// `name=value` of the sign-in cookie, once signed in.
    pub cookie: Option<String>,
}

impl ConsoleClient {
    /// `http` must not follow redirects (the test server's does not).
    pub fn new(http: reqwest::Client, base: String) -> Self {
        Self {
            http,
            base,
            cookie: None,
        }
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Page> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        read(req.send().await?).await
    }

    /// Get `path` as a link on a page of `site` would (`Sec-Fetch-Site`).
    pub async fn get_from(&self, path: &str, site: &str) -> anyhow::Result<Page> {
        let mut req = self
            .http
            .get(format!("{}{path}", self.base))
            .header("sec-fetch-site", site);
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        read(req.send().await?).await
    }

    /// Follow a live stream (`/console/devices/live`) with this client's cookie.
    pub async fn stream(&self, path: &str) -> anyhow::Result<crate::EventStream> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        // Bounded: a proxy that buffers the stream would hold even the headers.
        let resp = tokio::time::timeout(crate::extension::READ_DEADLINE, req.send())
            .await
            .map_err(|_| anyhow::anyhow!("stream: no answer within the read deadline"))??;
        anyhow::ensure!(resp.status() == 200, "stream: HTTP {}", resp.status());
        Ok(crate::EventStream::new(resp))
    }

    /// Post `fields` (already URL-safe) as a form from this site, or from
    /// `site` as `Sec-Fetch-Site` says.
    pub async fn post_from(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        site: &str,
    ) -> anyhow::Result<Page> {
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", site)
            .body(body.join("&"));
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        read(req.send().await?).await
    }

    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> anyhow::Result<Page> {
        self.post_from(path, fields, "same-origin").await
    }

    /// Sign in with `token`; keeps the cookie. Returns the answer (a redirect to
    /// the devices page when it worked).
    pub async fn sign_in(&mut self, token: &str) -> anyhow::Result<Page> {
        let page = self.post("/console/sign-in", &[("token", token)]).await?;
        if let Some(set) = page.headers.get(SET_COOKIE) {
            let set = set.to_str().context("cookie")?;
            let pair = set.split(';').next().context("cookie pair")?;
            self.cookie = Some(pair.to_owned());
        }
        Ok(page)
    }
}

async fn read(resp: reqwest::Response) -> anyhow::Result<Page> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await?;
    Ok(Page {
        status,
        headers,
        body,
    })
}

impl crate::TestServer {
    /// A console client for this server, not signed in.
    pub fn console(&self) -> ConsoleClient {
        ConsoleClient::new(self.http.clone(), self.http_base())
    }

    /// A console client signed in with `token` (an admin or member token).
    pub async fn console_signed_in(&self, token: &str) -> anyhow::Result<ConsoleClient> {
        let mut web = self.console();
        let page = web.sign_in(token).await?;
        anyhow::ensure!(
            page.status == 303,
            "sign-in: HTTP {} {}",
            page.status,
            page.body
        );
        Ok(web)
    }
}
