//! A full disk: `latchkeyd` runs on SQLite in a 2 MiB tmpfs of its own (a private mount
//! namespace made with `unshare`, so no root is needed and nothing outside the test
//! sees it). With the disk filled, writes answer 503 with a stable code, no grant is
//! half made, reads are still served, and once space is freed the same link pairs and
//! new links can be made, without a restart.

#![allow(clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use latchkey_testkit::extension::new_token;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Daemon, FakeExtension, wait_until};
use serde_json::json;
use tokio::process::Command;

const DEADLINE: Duration = Duration::from_secs(20);

/// Fill the filesystem holding `dir` until a write fails; returns the filler file.
fn fill(dir: &Path) -> PathBuf {
    let filler = dir.join("filler");
    let mut file = std::fs::File::create(&filler).expect("filler");
    let block = vec![0u8; 16 * 1024];
    // At most 4 MiB of writes: the filesystem is 2 MiB.
    for _ in 0..256 {
        if file
            .write_all(&block)
            .and_then(|()| file.sync_all())
            .is_err()
        {
            return filler;
        }
    }
    panic!("the disk never filled up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_503_with_nothing_half_done_and_recovers_without_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = dir.path().join("disk");
    std::fs::create_dir_all(&mount).expect("mount point");
    let mut command = Command::new("unshare");
    command
        .args(["--user", "--map-root-user", "--mount", "--", "sh", "-c"])
        .arg(
            r#"mount -t tmpfs -o size=2m tmpfs "$1" && exec "$2" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --data-dir "$1/data""#,
        )
        .arg("sh")
        .arg(&mount)
        .arg(env!("CARGO_BIN_EXE_latchkeyd"))
        .env("LATCHKEY_LOG", "warn");
    let log = dir.path().join("latchkeyd.log");
    let daemon = Daemon::spawn(
        command,
        Stdio::from(std::fs::File::create(&log).expect("log")),
    )
    .await
    .expect("latchkeyd in its own mount namespace");
    // The tmpfs as the daemon sees it.
    let pid = daemon.child.id().expect("pid");
    let disk =
        PathBuf::from(format!("/proc/{pid}/root")).join(mount.strip_prefix("/").expect("absolute"));
    assert!(
        disk.join("data/latchkey.sqlite3").exists(),
        "store on the tmpfs"
    );

    let http = latchkey_testkit::http_client();
    let admin = daemon.admin(&http).expect("admin");
    let pairing = admin.create_pairing(None, None).await.expect("pairing");
    let ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("link");

    let filler = fill(&disk);
    // A new link: 503 store_unavailable, with Retry-After.
    let (status, body) = admin
        .raw(Method::POST, "/v1/admin/pairings", Some(json!({})))
        .await
        .expect("answer");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable");
    // Redeeming the link: 503 as bsk answers a busy store, and nothing is granted.
    ext.clone()
        .pair_with(&new_token())
        .await
        .expect("answer")
        .expect_err("no grant on a full disk")
        .assert_store_busy();
    // Reads are still served, and show no half-made device.
    assert!(admin.devices().await.expect("devices").is_empty());
    assert_eq!(
        http.get(format!("{}/healthz", daemon.http_base()))
            .send()
            .await
            .expect("healthz")
            .status()
            .as_u16(),
        200
    );

    // Space comes back: the same link pairs, and new links can be made.
    std::fs::remove_file(&filler).expect("free the disk");
    assert!(
        wait_until(DEADLINE, || async {
            let mut attempt = ext.clone();
            attempt.pair().await.is_ok()
        })
        .await,
        "the link pairs once there is space again\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(admin.devices().await.expect("devices").len(), 1);
    admin.create_pairing(None, None).await.unwrap_or_else(|e| {
        panic!(
            "new links after recovery: {e}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
}
