//! `latchkeyd`: parse arguments and hand over to the library.

/// See [`latchkey_server::Allocator`] for why.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: latchkey_server::Allocator = latchkey_server::Allocator;

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
