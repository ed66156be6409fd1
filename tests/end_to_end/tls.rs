//! TLS on both sides with the real upstream serving TLS: the Rust driver connects
//! to mongotap over TLS (with a client certificate, which mongotap requires), and
//! mongotap connects to SecantusDB over TLS from the upstream URI's options. The
//! traffic inside is analysed as over plain TCP. Certificates are made by the
//! `openssl` command for each run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use bson::{doc, Document};
use mongodb::Client;
use mongotap::proxy::tls::{ClientTls, TlsOptions, UpstreamTls};
use mongotap::proxy::{Proxy, ProxyConfig};

/// A CA, a server certificate for localhost and 127.0.0.1, and a client
/// certificate, as PEM files (`server.pem` and `client.pem` hold chain and key).
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn make() -> Certs {
        // One directory per call: the tests run at once.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mongotap-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sh = |script: &str| {
            let out = Command::new("sh").arg("-c").arg(script).current_dir(&dir).output().expect("sh");
            assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        for ca in ["ca", "otherca"] {
            sh(&format!("openssl req -x509 {ec} -keyout {ca}.key -out {ca}.pem -days 2 -subj '/CN=mongotap test {ca}'"));
        }
        for (name, ext) in [
            ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
            ("client", "extendedKeyUsage=clientAuth"),
        ] {
            std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
            sh(&format!(
                "openssl req {ec} -keyout {name}.key -out {name}.csr -subj '/CN={name}' && \
                 openssl x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                   -extfile {name}.ext -out {name}.crt && cat {name}.crt {name}.key > {name}.pem"
            ));
        }
        Certs { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn client_uri(addr: std::net::SocketAddr, certs: &Certs, client_cert: Option<&Path>) -> String {
    let mut uri = format!(
        "mongodb://{addr}/?directConnection=true&appName=tls-e2e&tls=true&tlsCAFile={}&serverSelectionTimeoutMS=3000",
        certs.path("ca.pem").display()
    );
    if let Some(c) = client_cert {
        uri.push_str(&format!("&tlsCertificateKeyFile={}", c.display()));
    }
    uri
}

async fn proxy(upstream: &Upstream, certs: &Certs, upstream_uri_query: &str) -> Proxy {
    let opts = TlsOptions::from_uri(&format!("mongodb://{}/?{upstream_uri_query}", upstream.addr()))
        .unwrap()
        .unwrap();
    let config = ProxyConfig {
        client_tls: Some(ClientTls::new(&certs.path("server.pem"), Some(&certs.path("ca.pem"))).unwrap()),
        upstream_tls: Some(UpstreamTls::new("127.0.0.1", &opts).unwrap()),
        ..proxy_config(&upstream.addr())
    };
    Proxy::start(config).await.unwrap()
}

async fn crud(uri: &str) -> mongodb::error::Result<u64> {
    let client = Client::with_uri_str(uri).await?;
    let c = client.database("tls").collection::<Document>("orders");
    c.insert_many((0..20).map(|i| doc! {"_id": i, "customerId": i % 4})).await?;
    for i in 0..4 {
        c.find_one(doc! {"customerId": i}).await?;
    }
    let n = c.count_documents(doc! {}).await?;
    client.shutdown().await;
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_both_sides_with_a_required_client_certificate() {
    let certs = Certs::make();
    let upstream = Upstream::start_with(UpstreamOptions {
        tls: Some((certs.path("server.crt"), certs.path("server.key"))),
        ..UpstreamOptions::default()
    });
    let ca = certs.path("ca.pem");
    let p = proxy(&upstream, &certs, &format!("tls=true&tlsCAFile={}", ca.display())).await;
    let addr = p.local_addr();

    // With its certificate, the driver is served through two TLS hops.
    let n = crud(&client_uri(addr, &certs, Some(&certs.path("client.pem")))).await.unwrap();
    assert_eq!(n, 20);
    // Without one, mongotap refuses it; in plaintext, too.
    assert!(crud(&client_uri(addr, &certs, None)).await.is_err(), "no client certificate: refused");
    let plain = format!("mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS=2000");
    assert!(crud(&plain).await.is_err(), "plaintext to a TLS listener: refused");

    let analysis = p.shutdown().await;
    let pl = analysis.pipeline().lock().unwrap();
    let rows = pl.table().rows();
    let find = rows.iter().find(|r| r.command == "find" && r.namespace == "tls.orders").expect("a find row");
    assert_eq!(find.count, 4, "the traffic inside TLS is analysed like any other");
    assert_eq!(pl.exchange_stats().parse_errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_certificate_is_verified_unless_told_otherwise() {
    let certs = Certs::make();
    let upstream = Upstream::start_with(UpstreamOptions {
        tls: Some((certs.path("server.crt"), certs.path("server.key"))),
        ..UpstreamOptions::default()
    });
    let uri = client_uri;
    // The wrong CA: every connection fails at mongotap's handshake with the upstream.
    let other = certs.path("otherca.pem");
    let p = proxy(&upstream, &certs, &format!("tls=true&tlsCAFile={}", other.display())).await;
    let client_pem = certs.path("client.pem");
    assert!(crud(&uri(p.local_addr(), &certs, Some(&client_pem))).await.is_err());
    p.shutdown().await;
    // tlsAllowInvalidCertificates (staging only) accepts it.
    let q = format!("tls=true&tlsCAFile={}&tlsAllowInvalidCertificates=true", other.display());
    let p = proxy(&upstream, &certs, &q).await;
    assert_eq!(crud(&uri(p.local_addr(), &certs, Some(&client_pem))).await.unwrap(), 20);
    p.shutdown().await;
}

/// The same from the command line, as users run it: mongod's flag names toward
/// clients, the upstream URI's own TLS options toward the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_takes_mongod_flags_and_the_upstream_uri_options() {
    let certs = Certs::make();
    let upstream = Upstream::start_with(UpstreamOptions {
        tls: Some((certs.path("server.crt"), certs.path("server.key"))),
        ..UpstreamOptions::default()
    });
    let port = free_port();
    let report = certs.path("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["proxy", "--listen", &format!("127.0.0.1:{port}"), "--admin", "off"])
        .arg("--upstream")
        .arg(format!("mongodb://{}/?tls=true&tlsCAFile={}", upstream.addr(), certs.path("ca.pem").display()))
        .arg("--tls-certificate-key-file")
        .arg(certs.path("server.pem"))
        .arg(format!("--report-json={}", report.display()))
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr).await;
    // No --tls-ca-file: client certificates are not asked for.
    assert_eq!(crud(&client_uri(addr, &certs, None)).await.unwrap(), 20);
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let finds = r["access_patterns"].as_array().unwrap().iter().find(|p| p["command"] == "find").unwrap();
    assert_eq!(finds["count"], 4);
    // An unreadable certificate file is a clear error at start (exit 2, as any flag
    // whose value is refused before anything starts).
    let bad = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["proxy", "--upstream", &upstream.addr(), "--tls-certificate-key-file", "/nonexistent.pem"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent.pem"));
}

/// SCRAM-SHA-256 passes through TLS on both sides untouched: the right password is
/// served, a wrong one refused by the upstream, and no auth payload or password
/// reaches the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_passes_through_tls_untouched() {
    let certs = Certs::make();
    let tls = Some((certs.path("server.crt"), certs.path("server.key")));
    let storage = certs.path("data");
    let direct = |u: &Upstream| {
        format!(
            "mongodb://{}/?directConnection=true&tls=true&tlsCAFile={}",
            u.addr(),
            certs.path("ca.pem").display()
        )
    };
    // A user, created before the server requires authentication.
    let mut setup = Upstream::start_with(UpstreamOptions {
        storage: Some(storage.clone()),
        tls: tls.clone(),
        ..UpstreamOptions::default()
    });
    let admin = Client::with_uri_str(direct(&setup)).await.unwrap();
    admin
        .database("admin")
        .run_command(doc! {"createUser": "app", "pwd": "s3cret-TLS-pass", "roles": [{"role": "readWrite", "db": "tls"}]})
        .await
        .unwrap();
    admin.shutdown().await;
    setup.stop();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let upstream = Upstream::start_with(UpstreamOptions {
        storage: Some(storage),
        tls,
        auth: true,
        ..UpstreamOptions::default()
    });
    let ca = certs.path("ca.pem");
    let p = proxy(&upstream, &certs, &format!("tls=true&tlsCAFile={}", ca.display())).await;
    let with = |password: &str| {
        client_uri(p.local_addr(), &certs, Some(&certs.path("client.pem")))
            .replace("mongodb://", &format!("mongodb://app:{password}@"))
            + "&authSource=admin"
    };
    assert_eq!(crud(&with("s3cret-TLS-pass")).await.unwrap(), 20);
    assert!(crud(&with("wrong-password")).await.is_err(), "a wrong password is refused");
    let analysis = p.shutdown().await;
    let pl = analysis.pipeline().lock().unwrap();
    let report = mongotap_analyzers::report::Report::build(&pl, Default::default());
    let text = serde_json::to_string(&report).unwrap();
    let commands: Vec<&str> = report.access_patterns.iter().map(|r| r.command.as_str()).collect();
    assert!(commands.contains(&"saslContinue"), "auth is counted by name: {commands:?}");
    assert!(!text.contains("s3cret") && !text.contains("payload") && !text.contains("wrong-password"));
}
