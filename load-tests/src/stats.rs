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

/// p50, p99 and p999 of unsorted samples, in microseconds, and the distribution
/// at fixed quantiles for the report's charts.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub samples: usize,
    pub p50_us: u128,
    pub p99_us: u128,
    pub p999_us: u128,
    /// (quantile, microseconds) at [`CDF_QUANTILES`].
    #[serde(default)]
    pub cdf: Vec<(f64, u128)>,
}

/// Where the distribution is sampled: evenly to p95, then the tail.
const CDF_QUANTILES: &[f64] = &[
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
    0.85, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0,
];

pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort();
    Summary {
        samples: samples.len(),
        p50_us: percentile(&samples, 0.50).as_micros(),
        p99_us: percentile(&samples, 0.99).as_micros(),
        p999_us: percentile(&samples, 0.999).as_micros(),
        cdf: CDF_QUANTILES
            .iter()
            .map(|&q| (q, percentile(&samples, q).as_micros()))
            .collect(),
    }
}
