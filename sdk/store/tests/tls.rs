//! HTTPS checked by the platform's verifier: a loopback server with a certificate from a CA of
//! its own is refused until the system trusts that CA (on Linux the verifier reads the system
//! store, which SSL_CERT_FILE stands in for here, as an enterprise CA would be installed).
//! Its own test binary: the environment variable is process-wide.
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tern_store::{sha256_hex, DownloadOptions, ModelSpec, Store, StoreError};

/// Serves `body` over TLS with `cert` for every connection, on a thread; the port.
fn serve_tls(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>, body: Vec<u8>) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("server certificate");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let Ok(conn) = rustls::ServerConnection::new(Arc::clone(&config)) else { continue };
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut request = [0u8; 4096];
            // A client that refuses the certificate ends the handshake here.
            if tls.read(&mut request).is_err() {
                continue;
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = tls.write_all(head.as_bytes()).and_then(|()| tls.write_all(&body));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    port
}

#[test]
fn a_ca_the_system_trusts_is_accepted_and_an_unknown_one_refused() {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let leaf_key = KeyPair::generate().expect("key");
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));

    let body: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    let port = serve_tls(leaf.der().clone(), key, body.clone());
    let url = format!("https://localhost:{port}/tls.gguf");
    let spec = ModelSpec::new("tls", "tls.gguf", body.len() as u64, &sha256_hex(&body[..]).expect("hash"));
    let dir = std::env::temp_dir().join(format!("tern-store-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    let opts = DownloadOptions { retries: 0, ..Default::default() };

    // An empty trust store trusts nothing, so the test does not depend on the machine's.
    let empty = dir.join("none.pem");
    std::fs::write(&empty, "").expect("write");
    std::env::set_var("SSL_CERT_FILE", &empty);
    let refused = store.download(&spec, &url, &opts, &mut |_| {});
    match &refused {
        Err(StoreError::Network(m)) => assert!(m.contains("certificate"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(store.installed(&spec).is_none());

    let trusted = dir.join("ca.pem");
    std::fs::write(&trusted, ca.pem()).expect("write");
    std::env::set_var("SSL_CERT_FILE", &trusted);
    let path = store.download(&spec, &url, &opts, &mut |_| {}).expect("the CA the system trusts is accepted");
    assert_eq!(std::fs::read(path).expect("installed"), body);
    let _ = std::fs::remove_dir_all(&dir);
}
