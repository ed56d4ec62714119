//! The session table's rules: the busy gate, the caps, ownership.

use super::*;

#[test]
fn busy_gate_and_exemption() {
    let s = Session::new(
        "s1".into(),
        "t",
        "d",
        Opener::unwatched("tok"),
        0,
        crate::policy::unrestricted(),
    );
    let first = s.begin("tool.click", 1).expect("first call");
    let busy = s
        .begin("tool.snapshot", 2)
        .expect_err("second call refused");
    assert_eq!(busy, CoreError::SessionBusy);
    let exempt = s
        .begin("tool.record_stop", 3)
        .expect("record_stop skips the lock");
    drop(exempt);
    assert!(s.is_busy(), "the exempt call does not free the lock");
    drop(first);
    assert!(!s.is_busy());

    s.arm_marker();
    s.begin("tool.snapshot", 4)
        .expect("passive reads pass the gate");
    let gated = s.begin("tool.click", 5).expect_err("gated");
    assert_eq!(gated, CoreError::UserInterrupted);
    s.begin("tool.click", 6).expect("the marker is single use");
}

fn session(id: &str, tenant: &str, device: &str, token: &str) -> Arc<Session> {
    Session::new(
        id.into(),
        tenant,
        device,
        Opener::unwatched(token),
        0,
        crate::policy::unrestricted(),
    )
}

#[test]
fn caps_hold_per_device_and_per_token() {
    let t = SessionTable::default();
    t.try_insert(session("a", "t", "d1", "k1"), 2, 3)
        .expect("first");
    t.try_insert(session("b", "t", "d1", "k2"), 2, 3)
        .expect("second on d1");
    assert_eq!(
        t.try_insert(session("c", "t", "d1", "k3"), 2, 3),
        Err(SessionCap::PerDevice(2))
    );
    t.try_insert(session("d", "t", "d2", "k1"), 2, 3)
        .expect("k1's second");
    t.try_insert(session("e", "t", "d3", "k1"), 2, 3)
        .expect("k1's third");
    assert_eq!(
        t.try_insert(session("f", "t", "d4", "k1"), 2, 3),
        Err(SessionCap::PerToken(3))
    );
    // The same token id in another tenant is another token.
    t.try_insert(session("g", "u", "d5", "k1"), 2, 3)
        .expect("other tenant");
}

#[test]
fn ownership_is_tenant_and_token() {
    let t = SessionTable::default();
    t.try_insert(session("s1", "ta", "d", "tok-a"), 8, 16)
        .expect("insert");
    assert!(t.get_owned("ta", "tok-a", "s1").is_some());
    assert!(t.get_owned("ta", "tok-b", "s1").is_none());
    assert!(t.get_owned("tb", "tok-a", "s1").is_none());
    assert!(t.get_on_device("other", "s1").is_none());
    assert_eq!(t.purge_device("d", EndReason::BrowserDisconnected), 1);
    assert!(t.get_owned("ta", "tok-a", "s1").is_none());
}

/// A lookup racing an end finds the session or why it ended, never `not_found`:
/// the reason is kept before the session leaves the table, by `finish` and by
/// `purge_device` alike. Each round a second thread looks the session up without
/// pause while this one ends it.
#[test]
fn a_lookup_racing_an_end_never_answers_not_found() {
    let t = SessionTable::default();
    for round in 0..2_000 {
        let id = format!("s{round}");
        let s = session(&id, "t", "d", "k");
        t.try_insert(s.clone(), 8, 16).expect("insert");
        let start = Arc::new(std::sync::Barrier::new(2));
        let looker = {
            let (t, id, start) = (t.clone(), id.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                loop {
                    if let Err(e) = t.owned_by("t", "k", &id) {
                        return e;
                    }
                }
            })
        };
        start.wait();
        if round % 2 == 0 {
            t.finish(
                &s,
                EndReason::UserStopped,
                Abort::Ended(EndReason::UserStopped),
            );
        } else {
            t.purge_device("d", EndReason::UserStopped);
        }
        let seen = looker.join().expect("the lookup thread");
        assert_eq!(
            seen,
            CoreError::SessionEnded(EndReason::UserStopped),
            "round {round}"
        );
    }
}
