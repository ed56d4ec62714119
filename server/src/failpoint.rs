//! Test-only fault injection. With the `failpoints` feature, a point named in the
//! `LATCHKEY_FAILPOINTS` variable (comma-separated) aborts the process on the spot,
//! like `kill -9`: used to prove that a committed change survives a crash before the
//! reply. Without the feature every call compiles to nothing.
//!
//! The variable is read once, at the first failpoint reached: tests set it on the
//! daemon they spawn. Builds with the feature include the load generator's
//! latchkeyd (cargo unifies features through testkit), so a check on a busy path
//! costs a lookup in that list, not an environment read.

/// Whether `name` is listed in `LATCHKEY_FAILPOINTS`.
#[cfg(feature = "failpoints")]
fn armed(name: &str) -> bool {
    static LISTED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    LISTED
        .get_or_init(|| {
            std::env::var("LATCHKEY_FAILPOINTS")
                .map(|v| v.split(',').map(|p| p.trim().to_string()).collect())
                .unwrap_or_default()
        })
        .iter()
        .any(|p| p == name)
}

#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    if armed(name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}

/// With the `failpoints` feature and `device.event_panic` listed in
/// `LATCHKEY_FAILPOINTS`, an extension event named `test.panic` panics inside that
/// device's connection task: proves a panic stays inside one connection.
#[cfg(feature = "failpoints")]
#[allow(clippy::panic)] // The panic is the point: test builds only.
pub fn panic_on_event(event: &str) {
    if event == "test.panic" && armed("device.event_panic") {
        panic!("failpoint device.event_panic");
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn panic_on_event(_event: &str) {}

/// With the `failpoints` feature and `name` listed in `LATCHKEY_FAILPOINTS`, panics
/// the first time it is reached in the process and never again: proves that a task
/// which caught the panic carries on serving (`store::token_reads` with
/// `token_reads.panic_once`).
#[cfg(feature = "failpoints")]
#[allow(clippy::panic)] // The panic is the point: test builds only.
pub fn panic_once(name: &'static str) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static FIRED: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    if !armed(name) {
        return;
    }
    let first = FIRED
        .get_or_init(Mutex::default)
        .lock()
        .map(|mut fired| fired.insert(name))
        .unwrap_or(false);
    if first {
        panic!("failpoint {name}");
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn panic_once(_name: &'static str) {}
