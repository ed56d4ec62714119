//! Profiling only what is measured (load-tests/notes.md, "Where the reconnect CPU
//! goes"): with `LATCHKEY_LOAD_PERF_CONTROL` naming the control FIFO of a `perf
//! record` started with its events disabled (`-D -1 --control fifo:PATH`), the
//! generator enables perf when a measured phase starts and disables it when it
//! ends, so the setup before it (pairing thousands of devices, their first
//! connections) stays out of the profile.

use std::io::Write;

use anyhow::Context;

/// Environment variable: the path of perf's control FIFO.
pub const PERF_CONTROL: &str = "LATCHKEY_LOAD_PERF_CONTROL";

/// Tell perf that a measured phase starts (`true`) or ends (`false`); nothing
/// without the variable.
pub fn measured(on: bool) -> anyhow::Result<()> {
    match std::env::var_os(PERF_CONTROL) {
        Some(path) => signal(std::path::Path::new(&path), on),
        None => Ok(()),
    }
}

/// Write `enable` or `disable` to the FIFO. Fails at once, rather than waiting,
/// when no perf has it open for reading: a FIFO opened for writing without a
/// reader would otherwise block the generator until one came.
fn signal(path: &std::path::Path, on: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| {
            format!(
                "opening perf's control FIFO {} (is a `perf record --control fifo:...` reading it?)",
                path.display()
            )
        })?;
    fifo.write_all(if on { b"enable\n" } else { b"disable\n" })
        .context("writing to perf's control FIFO")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    fn fifo(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("perf.ctl");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        path
    }

    /// A control FIFO nobody reads is an error at once, not a hang.
    #[test]
    fn a_fifo_without_a_reader_fails_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = fifo(dir.path());
        let err = super::signal(&path, true).expect_err("no reader");
        assert!(format!("{err:#}").contains("is a `perf record"), "{err:#}");
    }

    /// With a reader, the command arrives.
    #[test]
    fn a_reader_gets_the_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = fifo(dir.path());
        // Opened for reading without blocking, as perf holds it, before the write.
        let mut reader = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .expect("reader")
        };
        super::signal(&path, false).expect("written");
        let mut got = String::new();
        reader.read_to_string(&mut got).expect("read");
        assert_eq!(got, "disable\n");
    }
}
