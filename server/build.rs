//! Rebuild when a migration is added or changed. `sqlx::migrate!` embeds the files
//! of `migrations/` at compile time, and cargo does not notice a new file in a
//! directory unless a build script asks it to: without this, an incremental build
//! kept the old schema (docs/architecture.md, `store/`).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
