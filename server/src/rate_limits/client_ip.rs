//! The client address a request is accounted to.
//!
//! It is the socket peer, unless that peer is a configured trusted proxy: then
//! `X-Forwarded-For` is walked right to left, skipping trusted proxies, and the first
//! untrusted address is the client (nginx `real_ip_recursive on`). A malformed header
//! falls back to the peer. Nobody else can claim an address.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Resolve the client address for a request from `peer` with `headers`.
pub fn client_ip(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer_ip = peer.ip().to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer_ip) {
        return peer_ip;
    }
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            return peer_ip;
        };
        for part in text.split(',') {
            match part.trim().parse::<IpAddr>() {
                Ok(ip) => hops.push(ip.to_canonical()),
                Err(_) => return peer_ip,
            }
        }
    }
    let mut client = peer_ip;
    for hop in hops.into_iter().rev() {
        client = hop;
        if !is_trusted(&hop) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn walks_right_to_left_through_trusted_proxies_only() {
        let trusted: Vec<IpNet> = vec![
            "127.0.0.0/8".parse().expect("net"),
            "10.0.0.0/8".parse().expect("net"),
        ];
        let proxy: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        let stranger: SocketAddr = "192.0.2.1:9".parse().expect("addr");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        // Untrusted peer: the header is ignored.
        assert_eq!(
            client_ip(stranger, &headers(&["203.0.113.5"]), &trusted),
            ip("192.0.2.1")
        );
        // Trusted peer: the right-most untrusted hop.
        assert_eq!(
            client_ip(
                proxy,
                &headers(&["198.51.100.7, 203.0.113.5, 10.1.1.1"]),
                &trusted
            ),
            ip("203.0.113.5")
        );
        // Several headers count as one list.
        assert_eq!(
            client_ip(proxy, &headers(&["198.51.100.7", "203.0.113.5"]), &trusted),
            ip("203.0.113.5")
        );
        // Malformed: the peer.
        assert_eq!(
            client_ip(proxy, &headers(&["not-an-ip"]), &trusted),
            ip("127.0.0.1")
        );
        // All trusted: the left-most.
        assert_eq!(
            client_ip(proxy, &headers(&["10.0.0.1"]), &trusted),
            ip("10.0.0.1")
        );
        // No header: the peer.
        assert_eq!(client_ip(proxy, &headers(&[]), &trusted), ip("127.0.0.1"));
    }
}
