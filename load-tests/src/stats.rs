//! Percentiles and formatting shared by the scenarios.

use std::time::Duration;

/// The `p` quantile (0..=1) of sorted samples (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(idx).copied().unwrap_or_default()
}

/// Microseconds as `1.23ms`.
pub fn ms(us: u128) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

/// p50, p99 and p999 of unsorted samples, in microseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub samples: usize,
    pub p50_us: u128,
    pub p99_us: u128,
    pub p999_us: u128,
}

pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort();
    Summary {
        samples: samples.len(),
        p50_us: percentile(&samples, 0.50).as_micros(),
        p99_us: percentile(&samples, 0.99).as_micros(),
        p999_us: percentile(&samples, 0.999).as_micros(),
    }
}
