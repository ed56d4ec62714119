//! The setup cap's admission rules, on real sockets where it matters.
use std::pin::Pin;
use std::task::Context;

use tokio::io::{AsyncRead, ReadBuf};

use super::*;

const SILENT: Duration = Duration::from_millis(100);
const SLOW: Duration = Duration::from_millis(300);
const A: PeerKey = PeerKey::Addr(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 20)));
const B: PeerKey = PeerKey::Addr(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 21)));

/// One address holds its share of the places and no more: another address
/// gets a place at once, and the first address's next connection can take a
/// place only from its own silent ones.
#[tokio::test]
async fn an_address_holds_its_share_and_pushes_out_only_its_own() {
    let slots = SetupSlots::new(4, 2, SILENT, SLOW);
    let a1 = slots.admit(A, None).await;
    a1.progress.wait_began();
    let a2 = slots.admit(A, None).await;
    a2.progress.wait_began();
    assert_eq!(
        slots
            .try_admit(A, || None)
            .map(|_| ())
            .map_err(|r| r.everyone),
        Err(false),
        "the share is full and nothing of A's is silent long enough yet"
    );
    let b1 = slots
        .try_admit(B, || None)
        .expect("another address gets in at once");
    b1.progress.wait_began();
    assert_eq!((slots.taken_by(A), slots.taken_by(B)), (2, 1));
    // Once A's oldest has been silent long enough, A's next takes its place.
    let a3 = slots.admit(A, None).await;
    assert!(a1.evicted.is_cancelled());
    assert!(!b1.evicted.is_cancelled(), "B's place is not A's to take");
    assert_eq!((slots.taken_by(A), slots.taken_by(B)), (2, 1));
    drop((a2, a3, b1));
    assert!(slots.is_empty());
}

#[test]
fn ipv6_addresses_share_their_64() {
    let a = PeerKey::of("2001:db8::1".parse().expect("ip"), None);
    let b = PeerKey::of("2001:db8::ffff:1".parse().expect("ip"), None);
    let c = PeerKey::of("2001:db8:0:1::1".parse().expect("ip"), None);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(
        PeerKey::of("::ffff:127.0.0.1".parse().expect("ip"), None),
        PeerKey::Addr("127.0.0.1".parse().expect("ip"))
    );
    assert_ne!(
        PeerKey::of("127.0.0.1".parse().expect("ip"), Some(1)),
        PeerKey::of("127.0.0.1".parse().expect("ip"), Some(2))
    );
}

#[tokio::test]
async fn a_freed_place_is_taken_and_nobody_is_pushed_out() {
    let slots = SetupSlots::new(2, 2, SILENT, SLOW);
    let a = slots.admit(A, None).await;
    let b = slots.admit(A, None).await;
    let freed_later = async {
        tokio::task::yield_now().await;
        b.done();
    };
    let (_c, ()) = tokio::join!(slots.admit(A, None), freed_later);
    assert!(!a.evicted.is_cancelled());
    assert_eq!(slots.len(), 2);
}

#[tokio::test]
async fn the_silent_go_first_and_the_talking_only_when_slow() {
    let slots = SetupSlots::new(2, 2, SILENT, SLOW);
    let talking = slots.admit(A, None).await;
    talking.progress.spoke.store(true, Ordering::Relaxed);
    talking.progress.wait_began();
    let silent = slots.admit(A, None).await;
    silent.progress.wait_began();
    let started = Instant::now();
    let third = slots.admit(A, None).await;
    assert!(silent.evicted.is_cancelled(), "the silent one goes first");
    assert!(
        !talking.evicted.is_cancelled(),
        "though the talking one is older"
    );
    assert!(started.elapsed() + Duration::from_millis(1) >= SILENT - Duration::from_millis(5));
    // Both left are talking now: the oldest goes only once it has kept the
    // server waiting too long.
    third.progress.spoke.store(true, Ordering::Relaxed);
    third.progress.wait_began();
    let _fourth = slots.admit(A, None).await;
    assert!(talking.evicted.is_cancelled());
    assert!(!third.evicted.is_cancelled());
    assert!(started.elapsed() + Duration::from_millis(1) >= SLOW - Duration::from_millis(5));
    assert_eq!(slots.len(), 2);
}

/// A busy server is not its clients' fault: a connection whose task has not
/// read yet, or whose bytes wait for the server, keeps its place however long.
#[tokio::test]
async fn time_the_server_keeps_a_connection_waiting_does_not_count() {
    let slots = SetupSlots::new(2, 2, SILENT, SLOW);
    let never_polled = slots.admit(A, None).await;
    let served_slowly = slots.admit(A, None).await;
    served_slowly.progress.spoke.store(true, Ordering::Relaxed);
    served_slowly.progress.wait_began();
    served_slowly.progress.wait_ended();
    let refused = tokio::time::timeout(SLOW * 2, slots.admit(A, None)).await;
    assert!(refused.is_err(), "a place was taken from a waiting server");
    assert!(!never_polled.evicted.is_cancelled());
    assert!(!served_slowly.evicted.is_cancelled());
    // Once the silent one has waited on its peer, it may go.
    never_polled.progress.wait_began();
    let _next = slots.admit(A, None).await;
    assert!(never_polled.evicted.is_cancelled());
    assert!(!served_slowly.evicted.is_cancelled());
}

/// Bytes that wait unread in the socket are the server's delay: their
/// connection keeps its place until the server has read them and waited again.
#[tokio::test]
async fn unread_bytes_in_the_socket_keep_a_connection_in() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().expect("addr"))
        .await
        .expect("connect");
    let (mut server, _) = listener.accept().await.expect("accept");
    tokio::io::AsyncWriteExt::write_all(&mut client, b"hello")
        .await
        .expect("write");
    let slots = SetupSlots::new(1, 1, SILENT, SLOW);
    let behind = slots.admit(A, probe(&server)).await;
    assert!(probe(&server).is_some(), "sockets can be duplicated here");
    // Its clock says silent: it was polled before its bytes arrived.
    behind.progress.wait_began();
    let refused = tokio::time::timeout(SILENT * 3, slots.admit(A, None)).await;
    assert!(refused.is_err(), "pushed out while its bytes wait unread");
    assert!(!behind.evicted.is_cancelled());
    // Once read, with nothing more coming, it is silent in truth.
    let mut hello = [0u8; 5];
    tokio::io::AsyncReadExt::read_exact(&mut server, &mut hello)
        .await
        .expect("read");
    let _next = slots.admit(A, None).await;
    assert!(behind.evicted.is_cancelled());
}

#[tokio::test]
async fn the_stream_keeps_the_peers_time_until_setup_is_over() {
    let slots = SetupSlots::new(1, 1, SILENT, SLOW);
    let slot = slots.admit(A, None).await;
    let (mut client, server) = tokio::io::duplex(64);
    let mut watched = slot.watch(server);
    let mut byte = [0u8; 1];
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut read = ReadBuf::new(&mut byte);
    assert!(
        Pin::new(&mut watched)
            .poll_read(&mut cx, &mut read)
            .is_pending()
    );
    assert_ne!(slot.progress.waiting_since.load(Ordering::Relaxed), 0);
    assert!(!slot.progress.spoke.load(Ordering::Relaxed));
    tokio::io::AsyncWriteExt::write_all(&mut client, b"x")
        .await
        .expect("write");
    tokio::io::AsyncReadExt::read_exact(&mut watched, &mut byte)
        .await
        .expect("read");
    assert!(slot.progress.spoke.load(Ordering::Relaxed));
    assert_eq!(slot.progress.waiting_since.load(Ordering::Relaxed), 0);
    slot.done();
    let mut read = ReadBuf::new(&mut byte);
    assert!(
        Pin::new(&mut watched)
            .poll_read(&mut cx, &mut read)
            .is_pending()
    );
    assert_eq!(
        slot.progress.waiting_since.load(Ordering::Relaxed),
        0,
        "no time is kept after setup"
    );
}
