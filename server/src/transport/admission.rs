//! Accepted connections waiting for a place in setup, taken in turn per client
//! address.
//!
//! The listener accepts at once whatever the kernel has, so that no address can keep
//! another's connection in the kernel's backlog behind its own: a connection that
//! finds no place ([`super::setup`]) waits here, in a queue of its address. Places
//! go round the addresses that have someone waiting, one connection each, so a
//! newcomer is next in line however many connections another address holds.
//!
//! Waiting is bounded: [`MAX_WAITING_PER_PEER`] per address (an office behind one
//! NAT reconnecting after a restart fits) and [`MAX_WAITING`] in all (one file
//! descriptor each). A connection beyond either is closed at once, and counted in
//! `latchkey_setup_dropped_total{reason}`; its client retries as after any failed
//! connect.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use tokio::net::TcpStream;

use super::setup::{PeerKey, SetupSlot, SetupSlots, probe};

/// Connections one address may have waiting for a place.
pub const MAX_WAITING_PER_PEER: usize = 1024;
/// Connections waiting for a place, all addresses together.
pub const MAX_WAITING: usize = 4096;

/// A connection accepted and not yet in setup.
#[derive(Debug)]
pub struct Waiting {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub key: PeerKey,
}

/// Why a connection could not wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Its address already has [`MAX_WAITING_PER_PEER`] waiting.
    PeerFull,
    /// [`MAX_WAITING`] are waiting.
    Full,
}

impl Dropped {
    pub fn label(self) -> &'static str {
        match self {
            Dropped::PeerFull => "peer_waiting_full",
            Dropped::Full => "waiting_full",
        }
    }
}

/// The queues, and the turn of each address.
#[derive(Debug, Default)]
pub struct WaitingRoom {
    queues: HashMap<PeerKey, VecDeque<Waiting>>,
    /// Addresses with someone waiting, in the order their turn comes.
    turns: VecDeque<PeerKey>,
    total: usize,
    /// Every place was taken, none could be pushed out, and none was freed since:
    /// nobody is offered one before this (a reconnect storm accepts thousands of
    /// connections while every place is taken; each must not look at all of them).
    full_until: Option<Instant>,
}

impl WaitingRoom {
    /// Queue `w` behind its address's other waiting connections, or refuse.
    pub fn push(&mut self, w: Waiting) -> Result<(), (Waiting, Dropped)> {
        let queue_len = self.queues.get(&w.key).map_or(0, VecDeque::len);
        if queue_len >= MAX_WAITING_PER_PEER {
            return Err((w, Dropped::PeerFull));
        }
        if self.total >= MAX_WAITING {
            return Err((w, Dropped::Full));
        }
        if queue_len == 0 {
            self.turns.push_back(w.key);
        }
        self.queues.entry(w.key).or_default().push_back(w);
        self.total += 1;
        Ok(())
    }

    /// A place was freed: offer places again.
    pub fn place_freed(&mut self) {
        self.full_until = None;
    }

    #[cfg(test)]
    /// Connections waiting now.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The next connection that gets a place, going round the addresses once:
    /// each address's oldest connection is offered a place in turn. `Err` when
    /// none got one, with when to look again (if no place frees first).
    pub fn admit_next(&mut self, slots: &SetupSlots) -> Result<(Waiting, SetupSlot), Duration> {
        let now = Instant::now();
        if let Some(until) = self.full_until {
            if until > now {
                return Err(until - now);
            }
            self.full_until = None;
        }
        let mut wait = Duration::MAX;
        for _ in 0..self.turns.len() {
            let Some(key) = self.turns.pop_front() else {
                break;
            };
            let Some(queue) = self.queues.get_mut(&key) else {
                continue;
            };
            let Some(head) = queue.front() else {
                self.queues.remove(&key);
                continue;
            };
            match slots.try_admit(key, || probe(&head.stream)) {
                Ok(slot) => {
                    let admitted = queue.pop_front();
                    if queue.is_empty() {
                        self.queues.remove(&key);
                    } else {
                        self.turns.push_back(key);
                    }
                    self.total = self.total.saturating_sub(1);
                    if let Some(w) = admitted {
                        return Ok((w, slot));
                    }
                }
                Err(refused) => {
                    self.turns.push_back(key);
                    if refused.everyone {
                        // Nobody else would get one either: this address keeps
                        // its turn for when a place frees.
                        self.turns.rotate_right(1);
                        self.full_until = Some(now + refused.wait);
                        return Err(refused.wait);
                    }
                    wait = wait.min(refused.wait);
                }
            }
        }
        Err(wait)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    const SILENT: Duration = Duration::from_secs(3600);

    async fn connections(
        listener: &tokio::net::TcpListener,
        from: IpAddr,
        n: usize,
    ) -> Vec<(TcpStream, Waiting)> {
        let mut out = Vec::new();
        for _ in 0..n {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.bind(SocketAddr::new(from, 0)).expect("bind");
            let client = socket
                .connect(listener.local_addr().expect("addr"))
                .await
                .expect("connect");
            let (stream, peer) = listener.accept().await.expect("accept");
            out.push((
                client,
                Waiting {
                    stream,
                    peer,
                    key: PeerKey::of(peer.ip(), None),
                },
            ));
        }
        out
    }

    /// Places go round the addresses: a newcomer behind a crowd from another
    /// address is admitted next.
    #[tokio::test]
    async fn the_next_place_goes_to_the_next_address_in_turn() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let slots = SetupSlots::new(4, 2, SILENT, SILENT);
        let mut room = WaitingRoom::default();
        let crowd = connections(&listener, "127.0.0.20".parse().expect("ip"), 10).await;
        let newcomer = connections(&listener, "127.0.0.21".parse().expect("ip"), 1).await;
        let mut clients = Vec::new();
        for (client, w) in crowd.into_iter().chain(newcomer) {
            clients.push(client);
            room.push(w).expect("room to wait");
        }
        let mut admitted = Vec::new();
        while let Ok((w, slot)) = room.admit_next(&slots) {
            admitted.push((w.key, slot));
        }
        let keys: Vec<PeerKey> = admitted.iter().map(|(k, _)| *k).collect();
        let crowd_key = PeerKey::Addr("127.0.0.20".parse().expect("ip"));
        let new_key = PeerKey::Addr("127.0.0.21".parse().expect("ip"));
        assert_eq!(
            keys,
            vec![crowd_key, new_key, crowd_key],
            "turns, then the crowd's share"
        );
        assert_eq!(room.len(), 8, "the rest of the crowd waits");
    }

    /// Once every place is taken and none may be pushed out, the room stops
    /// offering places until one is freed: a storm of arrivals does not look at
    /// every waiting connection on each arrival.
    #[tokio::test]
    async fn a_full_house_is_not_asked_again_until_a_place_frees() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let slots = SetupSlots::new(1, 1, SILENT, SILENT);
        let mut room = WaitingRoom::default();
        let mut clients = Vec::new();
        for last in 1..=3u8 {
            for (client, w) in connections(&listener, IpAddr::from([127, 0, 0, 30 + last]), 1).await
            {
                clients.push(client);
                room.push(w).expect("room");
            }
        }
        let (_, held) = room.admit_next(&slots).expect("the one place");
        assert!(room.admit_next(&slots).is_err(), "the house is full");
        drop(held);
        assert!(
            room.admit_next(&slots).is_err(),
            "not asked again before the freed place is reported"
        );
        room.place_freed();
        assert!(
            room.admit_next(&slots).is_ok(),
            "the freed place is offered"
        );
        assert_eq!(room.len(), 1);
    }

    #[tokio::test]
    async fn waiting_is_bounded_per_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut room = WaitingRoom::default();
        let from: IpAddr = "127.0.0.22".parse().expect("ip");
        let mut clients = Vec::new();
        for (client, w) in connections(&listener, from, MAX_WAITING_PER_PEER + 1).await {
            clients.push(client);
            if let Err((_, why)) = room.push(w) {
                assert_eq!(why, Dropped::PeerFull);
            }
        }
        assert_eq!(room.len(), MAX_WAITING_PER_PEER);
    }
}
