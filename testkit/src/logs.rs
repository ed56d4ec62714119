//! Captures every log line and span field the server emits during a test binary, so
//! tests can assert that no secret ever reached a log.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

static CAPTURE: OnceLock<Buffer> = OnceLock::new();

/// Install the capturing subscriber (trace level for Latchkey crates, everything
/// else at debug) once per process. Idempotent.
pub fn init() {
    CAPTURE.get_or_init(|| {
        let buffer = Buffer::default();
        let filter = EnvFilter::new(
            "debug,latchkey_server=trace,latchkey_testkit=trace,h2=info,hyper=info,sqlx=info",
        );
        let capture = tracing_subscriber::fmt::layer()
            .with_writer(buffer.clone())
            .with_ansi(false);
        let json = tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(buffer.clone());
        let _ = tracing_subscriber::registry()
            .with(filter)
            .with(capture)
            .with(json)
            .try_init();
        buffer
    });
}

/// Everything captured so far in this process (human and JSON renderings).
pub fn captured() -> String {
    CAPTURE
        .get()
        .map(|b| {
            String::from_utf8_lossy(&b.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
        })
        .unwrap_or_default()
}

/// Panic if any of `secrets` appears in the captured logs.
pub fn assert_no_secrets(secrets: &[&str]) {
    let logs = captured();
    assert!(
        !logs.is_empty(),
        "log capture is empty: init() was not called"
    );
    for s in secrets {
        assert!(!s.is_empty());
        assert!(!logs.contains(s), "a secret reached the logs");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn capture_sees_events_and_span_fields() {
        super::init();
        let span = tracing::info_span!("conn", device = "canary-device-field");
        let _guard = span.enter();
        tracing::info!(value = "canary-event-value", "hello");
        let logs = super::captured();
        assert!(logs.contains("canary-event-value"));
        assert!(
            logs.contains("canary-device-field"),
            "span fields must be captured too"
        );
    }
}
