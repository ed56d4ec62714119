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

/// The spread of per-round ratios: latchkeyd against the relay in alternating
/// rounds of one scenario, so drift in the machine's speed hits both alike.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RoundSpread {
    pub rounds: usize,
    pub min: f64,
    /// The middle ratio; with an even number of rounds, the mean of the two middle ones.
    pub median: f64,
    pub max: f64,
    /// Every round's ratio, in the order the rounds ran.
    #[serde(default)]
    pub ratios: Vec<f64>,
}

impl RoundSpread {
    pub fn of(ratios: Vec<f64>) -> Option<Self> {
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let middle = sorted.get(n / 2)?;
        let median = if n.is_multiple_of(2) {
            (sorted[n / 2 - 1] + middle) / 2.0
        } else {
            *middle
        };
        Some(Self {
            rounds: n,
            min: *sorted.first()?,
            median,
            max: *sorted.last()?,
            ratios,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::RoundSpread;

    #[test]
    fn median_of_even_and_odd_counts() {
        let even = RoundSpread::of(vec![4.0, 1.0, 3.0, 2.0]).expect("spread");
        assert_eq!((even.min, even.median, even.max), (1.0, 2.5, 4.0));
        assert_eq!(even.ratios, vec![4.0, 1.0, 3.0, 2.0]);
        let odd = RoundSpread::of(vec![3.0, 1.0, 2.0]).expect("spread");
        assert_eq!(odd.median, 2.0);
        assert!(RoundSpread::of(Vec::new()).is_none());
    }
}
