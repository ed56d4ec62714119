//! The unbuffered TLS stream against tokio-rustls's client (rustls's own buffered
//! connection) over in-memory pipes: every byte arrives in order whatever the
//! record and read sizes, a quiet connection holds no buffer, and the ends of a
//! connection (close_notify, a cut, a failed handshake) read as they should.

use std::sync::Arc;

use latchkey_testkit::tls::{TestCerts, chromium_offer};
use rustls::SupportedProtocolVersion;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream as ClientStream;

use super::*;

fn configs(
    versions: &[&'static SupportedProtocolVersion],
) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let certs = TestCerts::generate().expect("certs");
    let chain = vec![CertificateDer::from_pem_slice(certs.cert_pem.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(certs.key_pem.as_bytes()).expect("key");
    let server = crate::transport::tls::server_config(chain, key).expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(certs.ca_pem.as_bytes()).expect("ca"))
        .expect("root");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(chromium_offer()))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (server, Arc::new(client))
}

/// A handshake over a pipe of `pipe` bytes: our server end and the client's.
async fn pair(
    versions: &[&'static SupportedProtocolVersion],
    pipe: usize,
) -> (TlsStream<DuplexStream>, ClientStream<DuplexStream>) {
    let (server_config, client_config) = configs(versions);
    let (client_io, server_io) = tokio::io::duplex(pipe);
    let name = ServerName::try_from("localhost").expect("name");
    let (server, client) = tokio::join!(
        accept(server_io, server_config),
        TlsConnector::from(client_config).connect(name, client_io)
    );
    (
        server.expect("server handshake"),
        client.expect("client handshake"),
    )
}

fn assert_quiet(server: &TlsStream<DuplexStream>, when: &str) {
    assert_eq!(server.incoming.capacity(), 0, "incoming held {when}");
    assert_eq!(server.outgoing.capacity(), 0, "outgoing held {when}");
    assert_eq!(server.plain.capacity(), 0, "plaintext held {when}");
}

fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The server echoes each message, reading 1 KiB at a time; the client sends the
/// next only after the echo is back, so the server is quiet between messages.
async fn echo_sizes(versions: &[&'static SupportedProtocolVersion]) {
    let (mut server, mut client) = pair(versions, 4096).await;
    assert_quiet(&server, "after the handshake");
    let sizes = [1, 200, 16 * 1024, 16 * 1024 + 1, 70_000, 1_000_000];
    for size in sizes {
        let sent = message(size);
        let client_side = async {
            client.write_all(&sent).await.expect("client write");
            client.flush().await.expect("client flush");
            let mut back = vec![0; size];
            client.read_exact(&mut back).await.expect("client read");
            back
        };
        let server_side = async {
            let mut got = Vec::with_capacity(size);
            let mut chunk = [0u8; 1024];
            while got.len() < size {
                let n = server.read(&mut chunk).await.expect("server read");
                assert!(n > 0, "early end after {} of {size}", got.len());
                got.extend_from_slice(&chunk[..n]);
            }
            server.write_all(&got).await.expect("server write");
            server.flush().await.expect("server flush");
            got
        };
        let (back, got) = tokio::join!(client_side, server_side);
        assert!(got == sent, "the server read {size} bytes wrong");
        assert!(back == sent, "the client read the {size}-byte echo wrong");
        assert_quiet(&server, &format!("after a {size}-byte echo"));
    }
}

#[tokio::test]
async fn every_size_arrives_whole_both_ways_on_tls13_and_nothing_is_held_between() {
    echo_sizes(&[&rustls::version::TLS13]).await;
}

#[tokio::test]
async fn every_size_arrives_whole_both_ways_on_tls12_and_nothing_is_held_between() {
    echo_sizes(&[&rustls::version::TLS12]).await;
}

#[tokio::test]
async fn a_key_update_from_the_client_keeps_data_flowing_both_ways() {
    let (mut server, mut client) = pair(&[&rustls::version::TLS13], 64 * 1024).await;
    for round in 0..3u8 {
        client
            .get_mut()
            .1
            .refresh_traffic_keys()
            .expect("key update");
        client.write_all(&[round; 300]).await.expect("client write");
        client.flush().await.expect("client flush");
        let mut got = [0u8; 300];
        server.read_exact(&mut got).await.expect("server read");
        assert_eq!(got, [round; 300]);
        server
            .write_all(&[round + 10; 50])
            .await
            .expect("server write");
        server.flush().await.expect("server flush");
        let mut back = [0u8; 50];
        client.read_exact(&mut back).await.expect("client read");
        assert_eq!(back, [round + 10; 50]);
    }
}

#[tokio::test]
async fn close_notify_each_way_reads_as_a_clean_end() {
    let (mut server, mut client) = pair(&[&rustls::version::TLS13], 64 * 1024).await;
    client.write_all(b"last words").await.expect("client write");
    client.shutdown().await.expect("client shutdown");
    let mut got = Vec::new();
    server
        .read_to_end(&mut got)
        .await
        .expect("server reads to a clean end");
    assert_eq!(got, b"last words");
    // Half closed: the server still answers, then closes its side.
    server.write_all(b"goodbye").await.expect("server write");
    server.shutdown().await.expect("server shutdown");
    let mut back = Vec::new();
    client
        .read_to_end(&mut back)
        .await
        .expect("client reads to a clean end");
    assert_eq!(back, b"goodbye");
    let refused = server
        .write(b"more")
        .await
        .expect_err("no write after shutdown");
    assert_eq!(refused.kind(), io::ErrorKind::BrokenPipe);
}

#[tokio::test]
async fn a_cut_without_close_notify_is_an_unexpected_end() {
    let (mut server, client) = pair(&[&rustls::version::TLS13], 64 * 1024).await;
    drop(client);
    let mut buf = [0u8; 64];
    let cut = server
        .read(&mut buf)
        .await
        .expect_err("a cut is not a clean end");
    assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
    assert_quiet(&server, "after the cut");
}

#[tokio::test]
async fn plain_http_instead_of_a_client_hello_fails_the_handshake_with_an_alert() {
    let (server_config, _) = configs(&[&rustls::version::TLS13]);
    let (mut client, server_io) = tokio::io::duplex(4096);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let refused = accept(server_io, server_config)
        .await
        .err()
        .expect("not TLS");
    assert_eq!(refused.kind(), io::ErrorKind::InvalidData, "{refused}");
    let mut alert = Vec::new();
    client.read_to_end(&mut alert).await.expect("read");
    assert_eq!(alert.first(), Some(&21), "a TLS alert record: {alert:?}");
}

#[tokio::test]
async fn a_peer_that_leaves_mid_handshake_is_a_handshake_eof() {
    let (server_config, _) = configs(&[&rustls::version::TLS13]);
    let (client, server_io) = tokio::io::duplex(4096);
    drop(client);
    let refused = accept(server_io, server_config)
        .await
        .err()
        .expect("no handshake");
    assert_eq!(refused.kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(refused.to_string(), "tls handshake eof");
}

#[tokio::test]
async fn a_vectored_write_arrives_as_its_pieces_in_order() {
    let (mut server, mut client) = pair(&[&rustls::version::TLS13], 256 * 1024).await;
    let big = message(20_000);
    let pieces: [&[u8]; 4] = [b"HTTP/1.1 200 OK\r\n\r\n", b"", &big, b"tail"];
    let expected: Vec<u8> = pieces.concat();
    let mut written = 0;
    while written < expected.len() {
        // Resume where the last write stopped, as a caller of write_vectored does.
        let mut skip = written;
        let slices: Vec<io::IoSlice<'_>> = pieces
            .iter()
            .filter_map(|p| {
                let start = skip.min(p.len());
                skip -= start;
                (start < p.len()).then(|| io::IoSlice::new(&p[start..]))
            })
            .collect();
        let n = server.write_vectored(&slices).await.expect("write");
        assert!(n > 0);
        written += n;
    }
    server.flush().await.expect("flush");
    let mut got = vec![0; expected.len()];
    client.read_exact(&mut got).await.expect("read");
    assert!(got == expected, "the pieces arrived out of order");
}
