//! Where a webhook may be delivered (docs/webhooks.md, "Destinations"). The
//! gateway runs inside someone's network: a URL a team admin registers must not
//! become a way to reach what only the gateway can (its metadata service, its
//! database, its own admin listener). So, unless the operator allows private
//! destinations, an endpoint must be `https://` on a name or address that is
//! public: checked when it is registered, and again at every connection, on the
//! addresses the name resolves to then (a name that later resolves inward is
//! refused at that moment). Redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is reachable only from inside: loopback, private, link-local,
/// shared (CGNAT), unique-local, unspecified, multicast, documentation and the
/// like, and the IPv4 forms inside IPv6.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link local
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x0064 && v6.segments()[1] == 0xff9b) // NAT64
                || v6 == Ipv6Addr::from(1u128) // ::1
        }
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// Why a URL is not a destination.
pub fn check_url(raw: &str, allow_private: bool) -> Result<url::Url, String> {
    if raw.chars().count() > latchkey_protocol::webhooks::MAX_URL_CHARS {
        return Err(format!(
            "url must be at most {} characters",
            latchkey_protocol::webhooks::MAX_URL_CHARS
        ));
    }
    let url = url::Url::parse(raw).map_err(|e| format!("url does not parse: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => return Err("url must be https://".into()),
        other => return Err(format!("url must be https://, not {other}://")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry user info".into());
    }
    if url.fragment().is_some() {
        return Err("url must not carry a fragment".into());
    }
    let host = url.host().ok_or("url must name a host")?;
    if !allow_private {
        let literal = match host {
            url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
            url::Host::Domain(d) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                if d == "localhost" || d.ends_with(".localhost") {
                    return Err("url must not point at this machine".into());
                }
                None
            }
        };
        if literal.is_some_and(is_private) {
            return Err("url must not point at a private, loopback or link-local address".into());
        }
    }
    Ok(url)
}

/// Resolves like the system, then refuses a name whose addresses include a
/// private one (unless allowed): the check made at the moment of connecting.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && addrs.iter().any(|a| is_private(a.ip())) {
                return Err(format!("{host} resolves to a private address").into());
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inward_addresses_are_private_and_public_ones_are_not() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    /// `localhost` resolves offline (the hosts file): refused at the moment of
    /// connecting unless private destinations are allowed.
    #[tokio::test]
    async fn a_name_that_resolves_inward_is_refused_when_connecting() {
        use std::str::FromStr;
        let name = || Name::from_str("localhost").expect("a name");
        let refused = GuardedResolver {
            allow_private: false,
        }
        .resolve(name())
        .await;
        assert!(
            refused.is_err_and(|e| e.to_string().contains("private address")),
            "refused"
        );
        let allowed = GuardedResolver {
            allow_private: true,
        }
        .resolve(name())
        .await
        .expect("resolved");
        assert!(allowed.into_iter().all(|a| a.ip().is_loopback()));
    }

    #[test]
    fn only_public_https_urls_pass_unless_private_is_allowed() {
        assert!(check_url("https://hooks.example.com/latchkey", false).is_ok());
        for bad in [
            "http://hooks.example.com/",
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://169.254.169.254/latest/meta-data",
            "https://localhost:8443/",
            "https://user:pw@hooks.example.com/",
            "ftp://hooks.example.com/",
            "not a url",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9000/hook", true).is_ok());
    }
}
