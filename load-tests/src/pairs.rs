//! The shared set-up of the call scenarios: P simulated devices, each with one agent
//! socket whose calls go to it, on latchkeyd and on the bare relay.

use std::time::Duration;

use anyhow::Context;

use crate::agents::{self, AgentSocket};
use crate::fleet::{self, Behaviour, Fleet};
use crate::target::{Latchkeyd, Relay};

const ONLINE_DEADLINE: Duration = Duration::from_secs(60);

/// Devices and the agent sockets that drive them.
pub struct Pairs {
    pub fleet: Fleet,
    pub agents: Vec<AgentSocket>,
}

impl Pairs {
    pub async fn stop(self) {
        drop(self.agents);
        self.fleet.stop().await;
    }
}

/// `pairs` devices paired and online on latchkeyd, each with one agent socket
/// and `sessions` sessions that socket's calls use in turn.
pub async fn on_latchkeyd(
    server: &Latchkeyd,
    pairs: usize,
    sessions: usize,
    result_bytes: usize,
) -> anyhow::Result<Pairs> {
    let extensions = fleet::pair(server, pairs, 16).await?;
    let ids: Vec<String> = extensions
        .iter()
        .map(|e| e.device_id.clone().context("paired without an id"))
        .collect::<anyhow::Result<_>>()?;
    let mut fleet = Fleet::launch(
        extensions,
        Behaviour {
            result_bytes,
            delay: Duration::ZERO,
            handshake: true,
        },
    );
    fleet.wait_online(pairs, ONLINE_DEADLINE).await?;
    let agent = server.new_agent().await?;
    let mut agents = Vec::with_capacity(pairs);
    for id in &ids {
        let mut opened = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            opened.push(agent.start(Some(id)).await?.id);
        }
        let ws = agents::connect(
            &server.agent_socket_url(),
            Some(&agent.token),
            server.client_tls.clone(),
        )
        .await?;
        agents.push(AgentSocket {
            ws,
            sessions: opened,
        });
    }
    Ok(Pairs { fleet, agents })
}

/// The same on the bare relay.
pub async fn on_relay(relay: &Relay, pairs: usize, result_bytes: usize) -> anyhow::Result<Pairs> {
    let extensions = relay.extensions(pairs)?;
    let mut fleet = Fleet::launch(
        extensions,
        Behaviour {
            result_bytes,
            delay: Duration::ZERO,
            handshake: false,
        },
    );
    fleet.wait_online(pairs, ONLINE_DEADLINE).await?;
    let mut agents = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let ws = agents::connect(&relay.agent_url(), None, relay.client_tls.clone()).await?;
        agents.push(AgentSocket {
            ws,
            sessions: Vec::new(),
        });
    }
    Ok(Pairs { fleet, agents })
}
