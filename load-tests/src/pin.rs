//! Pinning (docs/benchmarks.md, "Machine, versions and commands"): with `--pin`,
//! every server process runs on core 0 alone and the generator on the other cores,
//! so that "per server core" is literal and the generator never takes the server's
//! core. The latchkeyd and relay children alike; scenarios that run their servers
//! inside the generator (latency, revoke) are not pinned, as one process cannot be
//! on two sides.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};

/// Set once from the command line.
static PINNED: AtomicBool = AtomicBool::new(false);
/// The generator moves to its cores once, when its first server child starts.
static GENERATOR_PINNED: AtomicBool = AtomicBool::new(false);

/// The core the servers run on.
const SERVER_CORE: usize = 0;

pub fn enable() {
    PINNED.store(true, Ordering::Relaxed);
}

pub fn pinned() -> bool {
    PINNED.load(Ordering::Relaxed)
}

/// The command a server child is started under: `taskset -c 0` when pinned.
pub fn server_prefix() -> Vec<String> {
    if pinned() {
        vec!["taskset".into(), "-c".into(), SERVER_CORE.to_string()]
    } else {
        Vec::new()
    }
}

/// The generator's cores: every core but the server's.
fn generator_cores(cores: usize) -> anyhow::Result<String> {
    if cores < 2 {
        bail!(
            "--pin needs two cores or more (one for the server, the rest for the generator); this machine has {cores}"
        );
    }
    Ok(format!("{}-{}", SERVER_CORE + 1, cores - 1))
}

/// Move every thread of the generator off the server's core (`taskset -a -p`);
/// threads started later inherit it. Does nothing unless pinned, and only once.
pub fn pin_generator() -> anyhow::Result<()> {
    if !pinned() || GENERATOR_PINNED.swap(true, Ordering::Relaxed) {
        return Ok(());
    }
    let cores = generator_cores(crate::procfs::cores())?;
    let status = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &cores, &std::process::id().to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset (util-linux) to pin the generator")?;
    if !status.success() {
        bail!("taskset could not pin the generator to cores {cores}: {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_gets_every_core_but_the_servers() {
        assert_eq!(generator_cores(2).unwrap(), "1-1");
        assert_eq!(generator_cores(8).unwrap(), "1-7");
        assert!(generator_cores(1).is_err());
    }
}
