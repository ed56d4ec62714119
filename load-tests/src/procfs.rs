//! What the generator reads about a server process and the kernel from /proc:
//! CPU time, resident memory, open descriptors, and the kernel's own memory for
//! sockets. Linux only, like the deployment target.

use anyhow::{Context, bail};

/// Clock ticks per second in /proc/PID/stat (USER_HZ: 100 on every Linux ABI we run on).
const TICKS_PER_SEC: f64 = 100.0;

/// One reading of a process.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ProcSample {
    /// User plus system CPU time since the process started, in seconds.
    pub cpu_secs: f64,
    /// Resident set size in bytes.
    pub rss_bytes: u64,
    /// Open file descriptors.
    pub fds: usize,
    pub threads: u64,
}

pub fn sample(pid: u32) -> anyhow::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unreadable /proc stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After ')': state is index 0, utime index 11, stime index 12, num_threads index 17.
    let field = |i: usize| -> anyhow::Result<u64> {
        Ok(fields.get(i).context("short /proc stat")?.parse::<u64>()?)
    };
    let cpu_secs = (field(11)? + field(12)?) as f64 / TICKS_PER_SEC;
    let threads = field(17)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kib = status_field(&status, "VmRSS:").context("no VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok(ProcSample {
        cpu_secs,
        rss_bytes: rss_kib * 1024,
        fds,
        threads,
    })
}

fn status_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Kernel memory that grows with connections: slab caches (socket structures,
/// inodes, dentries, epoll items) and the TCP buffer pages of /proc/net/sockstat.
/// Machine-wide: it counts both ends of a loopback connection.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct KernelSample {
    pub slab_bytes: u64,
    pub tcp_buffer_bytes: u64,
    pub tcp_sockets: u64,
}

pub fn kernel() -> anyhow::Result<KernelSample> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let slab_kib = status_field(&meminfo, "Slab:").context("no Slab in /proc/meminfo")?;
    let sockstat = std::fs::read_to_string("/proc/net/sockstat")?;
    let tcp = sockstat
        .lines()
        .find_map(|l| l.strip_prefix("TCP:"))
        .context("no TCP line in /proc/net/sockstat")?;
    let words: Vec<&str> = tcp.split_whitespace().collect();
    let value = |key: &str| -> anyhow::Result<u64> {
        let at = words
            .iter()
            .position(|w| *w == key)
            .with_context(|| format!("no {key} in sockstat"))?;
        Ok(words.get(at + 1).context("short sockstat")?.parse()?)
    };
    Ok(KernelSample {
        slab_bytes: slab_kib * 1024,
        // sockstat counts TCP buffer memory in pages.
        tcp_buffer_bytes: value("mem")? * 4096,
        tcp_sockets: value("inuse")?,
    })
}

/// The machine a run was measured on, recorded with every result.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub latchkey_version: String,
    pub git_commit: String,
    pub command: String,
    pub date: String,
    /// Servers on core 0 alone and the generator on the others (`--pin`).
    #[serde(default)]
    pub pinned: bool,
}

/// The machine's cores, not this process's: a pinned generator (`--pin`) may run
/// on fewer than the machine has.
pub fn cores() -> usize {
    let listed = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    if listed > 0 {
        listed
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = status_field(&meminfo, "MemTotal:").unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let command_output = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".to_string())
    };
    Machine {
        cpu,
        cores: cores(),
        memory_gib,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        latchkey_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: command_output("git", &["rev-parse", "--short", "HEAD"]),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        date: command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        pinned: crate::pin::pinned(),
    }
}

/// Fail early when the descriptor limit cannot hold `wanted` sockets.
pub fn check_fd_limit(wanted: usize) -> anyhow::Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok())
        .context("no open-file limit in /proc/self/limits")?;
    if soft < wanted {
        bail!("open-file limit is {soft}; this run needs about {wanted} (ulimit -n)");
    }
    Ok(())
}
