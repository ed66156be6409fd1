//! Replica-set mode: a driver that discovers the set (no directConnection) keeps
//! every connection on mongotap. The upstream is SecantusDB as a one-member replica
//! set, which names itself in its hello replies; the proof is the operating
//! system's own table of TCP connections: every connection to the upstream belongs
//! to the mongotap process. Without --rewrite-topology the same check finds the
//! driver's own connections to the upstream, so it can fail.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{free_port, wait_listening, Upstream, UpstreamOptions};
use mongodb::bson::{doc, Document};
use mongodb::Client;

/// The ids of the processes holding established TCP connections to `port` on loopback.
fn owners_of_connections_to(port: u16) -> Vec<u32> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote_port = u16::from_str_radix(f[2].rsplit_once(':')?.1, 16).ok()?;
            (remote_port == port && f[3] == "01").then(|| f[9].to_owned())
        })
        .collect();
    let mut owners = Vec::new();
    for proc in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = proc.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = std::fs::read_dir(proc.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else { continue };
            let link = link.to_string_lossy();
            if inodes.iter().any(|i| link == format!("socket:[{i}]")) {
                owners.push(pid);
            }
        }
    }
    owners
}

struct Mongotap {
    child: Child,
    addr: SocketAddr,
    report: std::path::PathBuf,
}

impl Mongotap {
    async fn start(upstream: &str, rewrite: bool) -> Mongotap {
        let port = free_port();
        let report = std::env::temp_dir().join(format!("mongotap-topology-{port}.json"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongotap"));
        cmd.args(["proxy", "--listen", &format!("127.0.0.1:{port}"), "--upstream", upstream])
            .args(["--admin", "off", "--report-json"])
            .arg(&report)
            .stderr(Stdio::null());
        if rewrite {
            cmd.arg("--rewrite-topology");
        }
        let child = cmd.spawn().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_listening(addr).await;
        Mongotap { child, addr, report }
    }

    fn stop(mut self) -> serde_json::Value {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(self.child.wait().unwrap().success());
        serde_json::from_str(&std::fs::read_to_string(&self.report).unwrap()).unwrap()
    }
}

impl Drop for Mongotap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Inserts and reads, and a transaction (a replica set allows them).
async fn workload(client: &Client) {
    let c = client.database("rs").collection::<Document>("orders");
    c.drop().await.unwrap();
    for i in 0..20 {
        c.insert_one(doc! {"n": i}).await.unwrap();
    }
    assert_eq!(c.count_documents(doc! {"n": {"$gte": 10}}).await.unwrap(), 10);
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"n": 100}).session(&mut s).await.unwrap();
    s.commit_transaction().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovering_driver_keeps_every_connection_on_mongotap() {
    let upstream = Upstream::start_with(UpstreamOptions { replica_set: true, ..Default::default() });
    // Reached as localhost, the server names itself 127.0.0.1:port: `me` ties the two.
    let proxy = Mongotap::start(&format!("localhost:{}", upstream.port), true).await;
    let me = proxy.addr.to_string();
    for uri in [
        format!("mongodb://{me}/?appName=discovering&heartbeatFrequencyMS=500"),
        format!("mongodb://{me}/?replicaSet=secantus&appName=named-set&heartbeatFrequencyMS=500"),
    ] {
        let client = Client::with_uri_str(&uri).await.unwrap();
        let hello = client.database("admin").run_command(doc! {"hello": 1}).await.unwrap();
        assert_eq!(hello.get_str("me").unwrap(), me, "{hello}");
        assert_eq!(hello.get_str("primary").unwrap(), me);
        assert_eq!(hello.get_array("hosts").unwrap().len(), 1);
        assert_eq!(hello.get_array("hosts").unwrap()[0].as_str(), Some(me.as_str()));
        workload(&client).await;
        // The monitor's awaitable hello streams a reply every heartbeat (500 ms
        // here): each must be renamed too, or the driver would connect around.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        client.database("rs").collection::<Document>("orders").find_one(doc! {}).await.unwrap();
        let owners = owners_of_connections_to(upstream.port);
        assert!(!owners.is_empty(), "mongotap holds connections to the upstream");
        assert!(
            owners.iter().all(|&pid| pid == proxy.child.id()),
            "{uri}: connections to the upstream from processes {owners:?}, mongotap is {}",
            proxy.child.id()
        );
        client.shutdown().await;
    }
    let report = proxy.stop();
    let apps: Vec<&str> = report["access_patterns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["apps"].as_array().unwrap().iter().filter_map(|a| a.as_str()))
        .collect();
    assert!(apps.contains(&"discovering") && apps.contains(&"named-set"), "{apps:?}");
    let inserts: u64 = report["access_patterns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["command"] == "insert" && p["namespace"] == "rs.orders")
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(inserts, 42, "every insert went through mongotap");
    assert_eq!(report["totals"]["parse_errors"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rewriting_a_discovering_driver_goes_around_mongotap() {
    let upstream = Upstream::start_with(UpstreamOptions { replica_set: true, ..Default::default() });
    let proxy = Mongotap::start(&upstream.addr(), false).await;
    let client = Client::with_uri_str(format!("mongodb://{}/?appName=around", proxy.addr)).await.unwrap();
    workload(&client).await;
    let owners = owners_of_connections_to(upstream.port);
    assert!(owners.contains(&std::process::id()), "the driver connected to the upstream itself: {owners:?}");
    client.shutdown().await;
    proxy.stop();
}

/// A server that answers every message with a hello reply naming itself and
/// `other` as the set's members: a three-line stand-in for a member, since the
/// real upstream is a one-member set. The traffic to `other` is real.
async fn member_naming(other: String) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let me = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let other = other.clone();
            tokio::spawn(async move {
                let mut buf = bytes::BytesMut::new();
                loop {
                    while let Some(f) = mongotap_wire::Frame::parse(&mut buf).unwrap() {
                        let reply = doc! {
                            "isWritablePrimary": true, "setName": "two", "hosts": [me.to_string(), other.clone()],
                            "primary": me.to_string(), "me": me.to_string(), "minWireVersion": 0,
                            "maxWireVersion": 21, "maxBsonObjectSize": 16777216, "maxMessageSizeBytes": 48000000,
                            "maxWriteBatchSize": 100000, "logicalSessionTimeoutMinutes": 30, "ok": 1.0,
                        };
                        let reply = mongotap_wire::Document::from_doc(&reply);
                        let out = match f.header.op_code {
                            // The driver's first handshake is a legacy OP_QUERY isMaster.
                            mongotap_wire::OpCode::Query => mongotap_wire::OpReply {
                                response_flags: 0,
                                cursor_id: 0,
                                starting_from: 0,
                                number_returned: 1,
                                documents: vec![reply],
                            }
                            .encode(1, f.header.request_id),
                            _ => mongotap_wire::OpMsg::new(reply).encode(1, f.header.request_id),
                        };
                        s.write_all(&out).await.unwrap();
                    }
                    if s.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                }
            });
        }
    });
    me
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_named_in_a_reply_gets_a_listener_that_reaches_it() {
    let real = Upstream::start_with(UpstreamOptions { replica_set: true, ..Default::default() });
    let seed = member_naming(real.addr()).await;
    let config = mongotap::proxy::ProxyConfig {
        rewrite_topology: Some("127.0.0.1".into()),
        ..crate::support::proxy_config(&seed.to_string())
    };
    let proxy = mongotap::proxy::Proxy::start(config).await.unwrap();
    let listen = proxy.local_addr().to_string();
    // Through the seed's listener: the second member is renamed to a new listener.
    let client = Client::with_uri_str(format!("mongodb://{listen}/?directConnection=true")).await.unwrap();
    let hello = client.database("admin").run_command(doc! {"hello": 1}).await.unwrap();
    let hosts: Vec<&str> = hello.get_array("hosts").unwrap().iter().filter_map(|h| h.as_str()).collect();
    assert_eq!(hosts[0], listen);
    assert_eq!(hello.get_str("me").unwrap(), listen);
    let second = hosts[1].to_owned();
    assert_ne!(second, listen);
    assert_ne!(second, real.addr(), "{hello}");
    let topology = proxy.shared().topology.clone().unwrap();
    assert_eq!(topology.members(), [(seed.to_string(), listen.clone()), (real.addr(), second.clone())]);
    // The new listener forwards to the member it stands for, the real server.
    let direct = Client::with_uri_str(format!("mongodb://{second}/?directConnection=true")).await.unwrap();
    let c = direct.database("two").collection::<Document>("c");
    c.insert_one(doc! {"x": 1}).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    let hello = direct.database("admin").run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_str("me").unwrap(), second, "the real server's own name, renamed");
    // Named again, it keeps its listener.
    client.database("admin").run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(topology.members().len(), 2);
    client.shutdown().await;
    direct.shutdown().await;
    proxy.shutdown().await;
}
