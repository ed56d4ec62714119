//! How many agent sockets are open, per token and on the node: a socket takes a slot
//! before its upgrade and gives it back when it ends, so the limits hold however a
//! socket ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open agent sockets per token and on the node, with a guard that gives the slot back.
#[derive(Debug, Clone, Default)]
pub struct AgentSocketCounter {
    inner: Arc<Mutex<SocketCounts>>,
}

#[derive(Debug, Default)]
struct SocketCounts {
    per_token: HashMap<String, usize>,
    total: usize,
}

#[derive(Debug)]
pub struct SocketSlot {
    counter: AgentSocketCounter,
    token_id: String,
}

/// Which agent-socket limit a new socket would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketLimit {
    PerToken(usize),
    PerNode(usize),
}

impl AgentSocketCounter {
    pub fn acquire(
        &self,
        token_id: &str,
        per_token: usize,
        per_node: usize,
    ) -> Result<SocketSlot, SocketLimit> {
        let mut counts = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if counts.total >= per_node {
            return Err(SocketLimit::PerNode(per_node));
        }
        let n = counts.per_token.entry(token_id.to_string()).or_insert(0);
        if *n >= per_token {
            return Err(SocketLimit::PerToken(per_token));
        }
        *n += 1;
        counts.total += 1;
        Ok(SocketSlot {
            counter: self.clone(),
            token_id: token_id.to_string(),
        })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut counts = self.counter.inner.lock().unwrap_or_else(|p| p.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_token.get_mut(&self.token_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_token.remove(&self.token_id);
            }
        }
    }
}
