//! Site patterns (docs/policy.md, "Where"): which hosts a pattern names, in one
//! place, so the gateway and our extension agree on every host.
//!
//! A pattern is a host name (`example.com`: that host only), a host name under
//! `*.` (`*.example.com`: every host below it, at any depth, but not
//! `example.com` itself), an IP literal (`127.0.0.1`, `[::1]`), or `*` (every
//! host). Names are compared in lower case without a trailing dot;
//! internationalised names are written in their `xn--` form, as URLs carry them.

/// The longest host name DNS allows.
const MAX_HOST_CHARS: usize = 253;

/// `pattern` in its canonical form, or why it is not one.
pub fn normalize(pattern: &str) -> Result<String, String> {
    let p = pattern.trim().to_ascii_lowercase();
    if p == "*" {
        return Ok(p);
    }
    let (wild, host) = match p.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, p.as_str()),
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return Err("empty host".into());
    }
    if host.len() > MAX_HOST_CHARS {
        return Err(format!("a host is at most {MAX_HOST_CHARS} characters"));
    }
    if !host.is_ascii() {
        return Err("write internationalised names in their xn-- form".into());
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let ok = !wild
            && !inner.is_empty()
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        return if ok {
            Ok(host.to_string())
        } else {
            Err("not an IPv6 literal ([…], without a wildcard)".into())
        };
    }
    if host.contains('*') {
        return Err(
            "a wildcard is allowed only as the whole pattern (*) or its first label (*.)".into(),
        );
    }
    for label in host.split('.') {
        let ok = (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "{label:?} is not a host label (1 … 63 of a-z 0-9 - _, no - at either end)"
            ));
        }
    }
    Ok(if wild {
        format!("*.{host}")
    } else {
        host.to_string()
    })
}

/// A URL scheme a policy may allow, in lower case. `javascript` runs script in
/// the page and is never a site; `chrome` and its kin are the browser's own pages.
pub fn normalize_scheme(scheme: &str) -> Result<String, String> {
    let s = scheme.trim().trim_end_matches(':').to_ascii_lowercase();
    let well_formed = s.len() <= 32
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
    if !well_formed {
        return Err("not a URL scheme (a letter, then letters, digits, + - .)".into());
    }
    if matches!(
        s.as_str(),
        "javascript"
            | "chrome"
            | "chrome-extension"
            | "devtools"
            | "edge"
            | "brave"
            | "vivaldi"
            | "opera"
    ) {
        return Err(format!("{s}: is not a scheme a policy can allow"));
    }
    Ok(s)
}

/// Whether canonical `pattern` names `host` (lower case, no trailing dot, as a
/// URL parser gives it; IPv6 in brackets).
pub fn matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(parent) => host
            .strip_suffix(parent)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => pattern == host,
    }
}

/// Whether `host` is named by any of `patterns`: the pattern that names it.
pub fn first_match<'a>(patterns: &'a [String], host: &str) -> Option<&'a str> {
    patterns
        .iter()
        .find(|p| matches(p, host))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_names_every_host_below_but_not_the_parent() {
        let p = normalize("*.example.com").expect("valid");
        assert!(matches(&p, "a.example.com"));
        assert!(matches(&p, "a.b.example.com"));
        assert!(!matches(&p, "example.com"));
        assert!(!matches(&p, "badexample.com"));
        assert!(!matches(&p, "a.example.com.evil"));
        assert!(!matches(&p, ".example.com"));
    }

    #[test]
    fn a_plain_host_names_only_itself() {
        let p = normalize("Example.com.").expect("valid");
        assert_eq!(p, "example.com");
        assert!(matches(&p, "example.com"));
        assert!(!matches(&p, "www.example.com"));
        assert!(matches("*", "anything.at.all"));
        assert!(matches(&normalize("[::1]").expect("v6"), "[::1]"));
        assert!(matches(&normalize("127.0.0.1").expect("v4"), "127.0.0.1"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "*.",
            "a*.example.com",
            "example.*",
            "ex ample.com",
            "-a.example",
            "bücher.example",
            "*.[::1]",
            "[zz]",
            "a..b",
        ] {
            assert!(normalize(bad).is_err(), "{bad:?}");
        }
        assert!(normalize(&"a".repeat(254)).is_err());
    }

    #[test]
    fn schemes_that_are_not_sites_are_refused() {
        assert_eq!(normalize_scheme("FILE:").expect("ok"), "file");
        for bad in ["javascript", "chrome", "1http", "ht tp", ""] {
            assert!(normalize_scheme(bad).is_err(), "{bad:?}");
        }
    }
}
