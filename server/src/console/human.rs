//! Times and people in human terms: "2 min ago", "in 89 days" (with the exact
//! time on hover), and "Ada Lovelace <ada@example.com>".

use crate::store::MemberRecord;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// How long `ms` milliseconds is, roughly: "less than a minute", "5 min",
/// "3 h", "89 days".
fn span(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < MINUTE {
        "less than a minute".into()
    } else if ms < HOUR {
        format!("{} min", ms / MINUTE)
    } else if ms < DAY {
        format!("{} h", ms / HOUR)
    } else {
        let days = ms / DAY;
        format!("{days} day{}", if days == 1 { "" } else { "s" })
    }
}

/// `then` seen from `now`: "2 min ago" for the past, "in 89 days" for the future.
pub fn relative(now: i64, then: i64) -> String {
    if then <= now {
        format!("{} ago", span(now - then))
    } else {
        format!("in {}", span(then - now))
    }
}

/// The exact time, for a title attribute: RFC 3339 in UTC.
pub fn exact(ms: i64) -> String {
    crate::clock::rfc3339(ms)
}

/// A time as the page shows it: in words, and exactly on hover.
pub struct When {
    pub words: String,
    pub exact: String,
}

impl When {
    pub fn of(now: i64, ms: i64) -> Self {
        Self {
            words: relative(now, ms),
            exact: exact(ms),
        }
    }
}

/// A person as every console page names them: "Name <email>".
pub fn person(display_name: &str, email: &str) -> String {
    format!("{display_name} <{email}>")
}

/// A member to pick in a form.
pub struct MemberChoice {
    pub id: String,
    pub name: String,
}

impl MemberChoice {
    pub fn of(m: &MemberRecord) -> Self {
        Self {
            id: m.id.clone(),
            name: person(&m.display_name, &m.email),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_and_future_read_as_a_person_would_say_them() {
        let now = 1_000 * DAY;
        assert_eq!(relative(now, now), "less than a minute ago");
        assert_eq!(relative(now, now - 2 * MINUTE - 5_000), "2 min ago");
        assert_eq!(relative(now, now - 3 * HOUR), "3 h ago");
        assert_eq!(relative(now, now - DAY), "1 day ago");
        assert_eq!(relative(now, now + 89 * DAY + HOUR), "in 89 days");
        assert_eq!(relative(now, now + 30_000), "in less than a minute");
    }
}
