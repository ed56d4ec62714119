//! A warning that an outage or a peer can repeat thousands of times a second
//! is logged at most once per period, with how many were held back since: the
//! log stays readable, and the count is not lost (the metrics count every one).

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Every {
    period: Duration,
    /// When one was last let through, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Every {
    pub const fn new(period: Duration) -> Self {
        Self {
            period,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(held back since the last one)` if this one is due, else `None`
    /// (and it is counted).
    pub fn due(&self) -> Option<u64> {
        self.due_at(Instant::now())
    }

    fn due_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (last, held) = &mut *state;
        if last.is_some_and(|t| now.saturating_duration_since(t) < self.period) {
            *held += 1;
            return None;
        }
        *last = Some(now);
        Some(std::mem::take(held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_period_with_the_count_held_back() {
        let minute = Duration::from_secs(60);
        let every = Every::new(minute);
        let t0 = Instant::now();
        assert_eq!(every.due_at(t0), Some(0));
        assert_eq!(every.due_at(t0 + minute / 2), None);
        assert_eq!(every.due_at(t0 + minute / 2), None);
        assert_eq!(every.due_at(t0 + minute), Some(2));
        assert_eq!(every.due_at(t0 + minute * 3 / 2), None);
        assert_eq!(every.due_at(t0 + minute * 2), Some(1));
    }
}
