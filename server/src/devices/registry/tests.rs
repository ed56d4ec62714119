//! The registry's bookkeeping: replacement, generations, capacity, close signals.

use super::*;

#[test]
fn replacement_closes_the_old_socket_and_old_cleanup_keeps_the_new() {
    let r = DeviceRegistry::default();
    let first = r.register("d", "t", 0);
    let second = r.register("d", "t", 0);
    assert_eq!(*first.close.borrow(), Some(CloseCode::Replaced));
    assert_eq!(*second.close.borrow(), None);
    r.unregister("d", first.generation);
    assert_eq!(r.len(), 1, "old cleanup must not evict the new socket");
    assert!(r.close("d", CloseCode::Revoked));
    assert_eq!(*second.close.borrow(), Some(CloseCode::Revoked));
    r.unregister("d", second.generation);
    assert!(r.is_empty());
    assert!(!r.close("d", CloseCode::Revoked));
}

#[test]
fn capacity_counts_handshaken_devices_and_a_replacement_keeps_its_slot() {
    let r = DeviceRegistry::default();
    let link = |id: &str| DeviceLink::new(id, "t", 1);
    let a = r.register("a", "t", 0);
    assert!(r.admits("b", 1), "an unhandshaken socket holds no slot");
    assert_eq!(r.attach_link("a", a.generation, link("a"), 1), Ok(()));
    assert_eq!(r.slots_taken(), 1);
    assert!(!r.admits("b", 1));
    let b = r.register("b", "t", 0);
    assert_eq!(
        r.attach_link("b", b.generation, link("b"), 1),
        Err(AttachError::AtCapacity)
    );
    r.unregister("b", b.generation);
    // The device already online may replace its own connection at capacity.
    assert!(r.admits("a", 1));
    let a2 = r.register("a", "t", 0);
    r.unregister("a", a.generation);
    assert_eq!(r.attach_link("a", a2.generation, link("a"), 1), Ok(()));
    assert_eq!(r.slots_taken(), 1);
    assert_eq!(
        r.attach_link("a", a.generation, link("a"), 1),
        Err(AttachError::Replaced)
    );
    r.unregister("a", a2.generation);
    assert_eq!(r.slots_taken(), 0);
    assert!(r.admits("b", 1));
}

#[test]
fn a_replacement_loop_is_held_back_for_the_rest_of_the_minute() {
    let r = DeviceRegistry::default();
    let first = r.register("d", "t", 0);
    assert!(!first.replaced);
    for _ in 0..3 {
        let again = r.register("d", "t", 0);
        assert!(again.replaced);
        r.note_replacement("d");
    }
    assert_eq!(
        r.replacement_backoff("d", 3),
        None,
        "three a minute are allowed"
    );
    r.note_replacement("d");
    let wait = r
        .replacement_backoff("d", 3)
        .expect("the fourth is one too many");
    assert!(wait <= REPLACEMENT_WINDOW && wait > std::time::Duration::from_secs(50));
    assert_eq!(r.replacement_backoff("other", 3), None);
}

#[test]
fn every_signalled_close_counts_as_a_grant_change_socket_or_not() {
    let r = DeviceRegistry::default();
    let before = r.grant_changes();
    // Revoked while its new socket was between authentication and registration.
    assert!(!r.close("dev-a", CloseCode::Revoked));
    let after_revoke = r.grant_changes();
    assert_ne!(after_revoke, before);
    let reg = r.register("dev-a", "t1", 0);
    assert_eq!(
        r.grant_changes(),
        after_revoke,
        "a registration is no change"
    );
    assert!(!r.close_generation("dev-a", reg.generation + 1, CloseCode::Revoked));
    assert_ne!(r.grant_changes(), after_revoke);
}

/// A device that connected to another replica later replaces the socket here;
/// one that connected there earlier (its notice overtaken by a reconnect to
/// this node), at the same millisecond, or as another team's id, does not.
#[test]
fn only_a_later_socket_elsewhere_replaces_the_one_here() {
    let r = DeviceRegistry::default();
    let here = r.register("d", "t", 1_000);
    assert_eq!(here.connected_at_ms, 1_000);
    assert!(!r.close_if_older("t", "d", 999));
    assert!(!r.close_if_older("t", "d", 1_000));
    assert!(!r.close_if_older("other", "d", 2_000));
    assert!(!r.close_if_older("t", "unknown", 2_000));
    assert_eq!(*here.close.borrow(), None);
    assert!(r.close_if_older("t", "d", 1_001));
    assert_eq!(*here.close.borrow(), Some(CloseCode::Replaced));
}

/// What a replica tells the others again when NATS is back, and answers a
/// notice of an older socket with: only handshaken sockets, with the time each
/// registered; a newer one here answers, an older or unhandshaken one does not.
#[test]
fn handshaken_sockets_are_told_with_their_times() {
    let r = DeviceRegistry::default();
    let shaken = r.register("d", "t", 2_000);
    let _pending = r.register("p", "t", 3_000);
    assert_eq!(
        r.attach_link("d", shaken.generation, DeviceLink::new("d", "t", 1), 10),
        Ok(())
    );
    assert_eq!(
        r.online_since(),
        [("t".to_string(), "d".to_string(), 2_000, Default::default())]
    );
    assert_eq!(r.newer_here("t", "d", 1_999), Some(2_000));
    assert_eq!(r.newer_here("t", "d", 2_000), None);
    assert_eq!(r.newer_here("other", "d", 1_000), None);
    assert_eq!(r.newer_here("t", "p", 1_000), None, "not handshaken");
}
