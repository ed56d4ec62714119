use super::*;

#[test]
fn defaults_are_valid() {
    assert_eq!(Config::default().problems(), vec![]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let c = Config {
        listen: "0.0.0.0:443".parse().expect("addr"),
        public_url: Some("ws://gw.example.com".into()),
        database_url: Some("mysql://x".into()),
        allowed_extension_ids: vec!["nope".into()],
        tls: Some(TlsFiles {
            cert: "/nonexistent/cert.pem".into(),
            key: "/nonexistent/key.pem".into(),
        }),
        ..Config::default()
    };
    let p = c.problems();
    assert_eq!(p.len(), 5, "{p:?}");
}

#[test]
fn plain_non_loopback_needs_a_trusted_proxy_and_wss() {
    let mut c = Config {
        listen: "0.0.0.0:8080".parse().expect("addr"),
        public_url: Some("wss://gw.example.com".into()),
        ..Config::default()
    };
    assert_eq!(c.problems().len(), 1);
    c.trusted_proxies = vec!["10.0.0.0/8".parse().expect("net")];
    assert_eq!(c.problems(), vec![]);
}

#[test]
fn masks_database_password() {
    let c = Config {
        database_url: Some("postgres://u:secret@db/x".into()),
        ..Config::default()
    };
    let m = c.masked();
    assert!(!m.database_url.unwrap_or_default().contains("secret"));
}
