//! `X-Forwarded-For` through trusted proxies: no panic, and the client address is
//! always the socket peer or an address that appears in the header.
#![no_main]

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, HeaderValue};
use latchkey_server::rate_limits::client_ip::client_ip;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut headers = HeaderMap::new();
    for line in rest.split(|b| *b == b'\n') {
        if let Ok(v) = HeaderValue::from_bytes(line) {
            headers.append("x-forwarded-for", v);
        }
    }
    let peer: SocketAddr = if selector & 1 == 0 {
        "127.0.0.1:9".parse().expect("peer")
    } else {
        "[::1]:9".parse().expect("peer")
    };
    let trusted = match selector >> 1 & 3 {
        0 => vec![],
        1 => vec!["127.0.0.0/8".parse().expect("net")],
        2 => vec![
            "127.0.0.0/8".parse().expect("net"),
            "::1/128".parse().expect("net"),
            "10.0.0.0/8".parse().expect("net"),
        ],
        _ => vec![
            "0.0.0.0/0".parse().expect("net"),
            "::/0".parse().expect("net"),
        ],
    };
    let client = client_ip(peer, &headers, &trusted);
    if client != peer.ip().to_canonical() {
        let listed: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|p| p.trim().parse::<IpAddr>().ok())
            .map(|ip| ip.to_canonical())
            .collect();
        assert!(
            listed.contains(&client),
            "{client} is neither the peer nor listed"
        );
    }
});
