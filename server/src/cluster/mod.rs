//! Cluster mode (docs/cluster.md): several latchkeyd replicas on one PostgreSQL
//! store, telling each other over NATS what their sockets must act on at once.
//!
//! The store already holds every grant, token and row, so any replica answers
//! any request that needs only the store. What the store cannot do is reach a
//! socket held by another process: a revocation on replica A must close the
//! device's socket on replica B now, not at B's next grant sweep, and a device
//! that reconnects to B must close its old socket on A. Those are the notices
//! of `latchkey_protocol::cluster`, published on one NATS subject that every
//! replica subscribes to.
//!
//! - [`peers`]: the handle the core tells notices to (a no-op on one node).
//! - [`nats`]: the connection, the publisher and the subscriber tasks.
//! - [`apply`]: what a notice from another replica does here.
//! - [`directory`], [`remote_link`], [`remote`]: calls from here to a device
//!   whose socket another replica holds; [`relay`]: that replica's side.
//! - [`session_client`], [`session_host`]: requests for a session by id from a
//!   replica it does not live on, and its replica's answers; [`members`],
//!   [`session_lists`]: who is in the cluster, and lists across it.

pub mod apply;
pub mod directory;
pub mod members;
pub mod nats;
pub mod peers;
pub mod relay;
pub mod remote;
pub mod remote_link;
pub mod session_client;
pub mod session_host;
pub mod session_lists;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use peers::{ClusterStatus, Peers};

/// The `[cluster]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// `nats://host:4222` (or `tls://…`; several comma-separated for a NATS
    /// cluster). Set: this replica runs in cluster mode. May carry a user and
    /// password or a token; it is masked when printed.
    pub nats_url: Option<String>,
    /// This replica's name in logs and in the notices it sends; the pod or
    /// host name by default, with a random suffix so a restarted replica is
    /// told apart from its predecessor.
    pub node_id: Option<String>,
    /// The subject notices travel on. Replicas of one gateway share it; give
    /// two gateways on one NATS different subjects.
    pub subject: String,
    /// A PEM file of the CAs the NATS server's certificate is checked against
    /// (the system's roots otherwise).
    pub ca_file: Option<PathBuf>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            nats_url: None,
            node_id: None,
            subject: "latchkey.notices".to_string(),
            ca_file: None,
        }
    }
}

impl ClusterConfig {
    /// Whether this replica runs in cluster mode.
    pub fn enabled(&self) -> bool {
        self.nats_url.is_some()
    }

    /// Each broken rule, worded for the operator. `postgres`: whether the store
    /// is PostgreSQL (replicas share one; SQLite is one process's file).
    pub fn problems(&self, postgres: bool) -> Vec<String> {
        let mut out = Vec::new();
        let Some(url) = &self.nats_url else {
            return out;
        };
        if !postgres {
            out.push(
                "cluster mode (cluster.nats_url) needs a PostgreSQL store (--database-url postgres://…): \
                 replicas share one store, and SQLite is a file of one process"
                    .into(),
            );
        }
        for server in url.split(',') {
            match url::Url::parse(server.trim()) {
                Ok(u) if matches!(u.scheme(), "nats" | "tls") && u.host().is_some() => {}
                Ok(u) => out.push(format!(
                    "cluster.nats_url {:?} must be nats://host:port or tls://host:port",
                    masked_url(&u)
                )),
                Err(e) => out.push(format!("cluster.nats_url does not parse: {e}")),
            }
        }
        let subject_ok = !self.subject.is_empty()
            && self.subject.len() <= 128
            && self.subject.split('.').all(|t| {
                !t.is_empty()
                    && t.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !subject_ok {
            out.push(
                "cluster.subject must be dot-separated tokens of letters, digits, - and _ (no wildcards)"
                    .into(),
            );
        }
        if let Some(id) = &self.node_id
            && !(1..=64).contains(&id.len())
        {
            out.push("cluster.node_id must be 1..=64 characters".into());
        }
        if let Some(ca) = &self.ca_file
            && !ca.is_file()
        {
            out.push(format!(
                "cluster.ca_file {} is not a readable file",
                ca.display()
            ));
        }
        out
    }

    /// A copy safe to print: passwords and tokens in the NATS URL are masked.
    pub fn masked(&self) -> ClusterConfig {
        let mut c = self.clone();
        if let Some(url) = &c.nats_url {
            let servers: Vec<String> = url
                .split(',')
                .map(|s| match url::Url::parse(s.trim()) {
                    Ok(u) => masked_url(&u),
                    Err(_) => "****".to_string(),
                })
                .collect();
            c.nats_url = Some(servers.join(","));
        }
        c
    }
}

/// `u` with its password, or a user name alone (NATS reads that as a token),
/// replaced by `****`.
fn masked_url(u: &url::Url) -> String {
    let mut u = u.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some("****"));
    } else if !u.username().is_empty() {
        let _ = u.set_username("****");
    }
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_url(url: &str) -> ClusterConfig {
        ClusterConfig {
            nats_url: Some(url.into()),
            ..Default::default()
        }
    }

    #[test]
    fn cluster_mode_is_refused_on_sqlite() {
        let problems = with_url("nats://127.0.0.1:4222").problems(false);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("PostgreSQL"), "{problems:?}");
        assert!(with_url("nats://127.0.0.1:4222").problems(true).is_empty());
        assert!(ClusterConfig::default().problems(false).is_empty());
    }

    #[test]
    fn bad_urls_and_subjects_are_named() {
        assert_eq!(with_url("http://x:1").problems(true).len(), 1);
        assert_eq!(with_url("nats://a:1, tls://b:2").problems(true).len(), 0);
        let mut c = with_url("nats://a:1");
        c.subject = "latchkey.>".into();
        assert_eq!(c.problems(true).len(), 1);
        c.subject = "a..b".into();
        assert_eq!(c.problems(true).len(), 1);
    }

    #[test]
    fn secrets_in_the_url_are_masked() {
        let c = with_url("nats://user:s3cret@a:4222,nats://t0ken@b:4222").masked();
        let url = c.nats_url.unwrap_or_default();
        assert!(!url.contains("s3cret") && !url.contains("t0ken"), "{url}");
        assert!(
            url.contains("user:****@a") && url.contains("****@b"),
            "{url}"
        );
    }
}
