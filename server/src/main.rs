//! `latchkeyd`: parse arguments and hand over to the library.

/// jemalloc rather than glibc's allocator. A gateway holds many quiet connections
/// after bursts of short-lived ones (a reconnect storm, a pairing wave); glibc
/// keeps the pages those bursts freed, where jemalloc gives them back, and its
/// thread caches are cheaper on the hot paths. Measured in docs/benchmarks.md
/// ("jemalloc"): less CPU per call and per reconnect, less memory per idle device.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    // First thing: one process-wide crypto provider for rustls (aws-lc-rs).
    if rustls::crypto::aws_lc_rs::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("latchkeyd: a rustls crypto provider was already installed");
    }
    latchkey_server::cli::main()
}
