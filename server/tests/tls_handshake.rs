//! What latchkeyd's own TLS negotiates with a browser-shaped client, on the real
//! listener: the hybrid post-quantum group and the suite Chromium puts first,
//! and never a resumed session (latchkeyd issues no tickets; see
//! `transport::tls`).

use std::sync::Arc;

use anyhow::Context;
use latchkey_testkit::{Backend, TestServer};
use rustls::client::Resumption;
use rustls::{CipherSuite, HandshakeKind, NamedGroup};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

async fn tls_server() -> anyhow::Result<(TestServer, Arc<rustls::ClientConfig>)> {
    let server = TestServer::builder(Backend::Sqlite)
        .tls(true)
        .start()
        .await?;
    let tls = server.client_tls().context("client TLS")?;
    Ok((server, tls))
}

/// One TLS connection that sends `GET /healthz` and reads the whole answer, so
/// that anything the server sends after its Finished (tickets included) has been
/// processed by the client.
async fn healthz(
    server: &TestServer,
    tls: Arc<rustls::ClientConfig>,
) -> anyhow::Result<TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(server.addr()).await?;
    let name = ServerName::try_from("localhost")?;
    let mut stream = TlsConnector::from(tls).connect(name, tcp).await?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    anyhow::ensure!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    Ok(stream)
}

#[tokio::test]
async fn a_chromium_shaped_offer_gets_hybrid_pq_key_exchange_and_aes_128() {
    let (server, tls) = tls_server().await.expect("server");
    let stream = healthz(&server, tls).await.expect("healthz");
    let (_, conn) = stream.get_ref();
    assert_eq!(
        conn.negotiated_key_exchange_group().map(|g| g.name()),
        Some(NamedGroup::X25519MLKEM768)
    );
    assert_eq!(
        conn.negotiated_cipher_suite().map(|s| s.suite()),
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256)
    );
    assert_eq!(conn.alpn_protocol(), None, "the client offered no ALPN");
    server.stop().await;
}

#[tokio::test]
async fn a_client_ready_to_resume_still_gets_a_full_handshake() {
    let (server, tls) = tls_server().await.expect("server");
    // One session cache across both connections, as a browser keeps one.
    let mut config = (*tls).clone();
    config.resumption = Resumption::in_memory_sessions(16);
    let config = Arc::new(config);
    for round in 0..3 {
        let stream = healthz(&server, config.clone()).await.expect("healthz");
        let (_, conn) = stream.get_ref();
        assert_eq!(
            conn.handshake_kind(),
            Some(HandshakeKind::Full),
            "connection {round} was resumed"
        );
    }
    server.stop().await;
}
