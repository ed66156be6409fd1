//! The admin HTTP endpoint (loopback by default): `/metrics`, `/report.json`,
//! `/report.html`, `/healthz`. A deliberately small GET-only HTTP/1.1 server: one
//! request per connection, bounded request size, no keep-alive.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{html, json, Report, RunFacts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics;
use crate::proxy::Shared;

/// Largest request head accepted.
const MAX_HEAD: usize = 8 * 1024;

/// Serves the admin endpoint until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, pipeline: Arc<Mutex<Pipeline>>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let (shared, pipeline) = (shared.clone(), pipeline.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), handle(socket, &shared, &pipeline)).await;
        });
    }
}

async fn handle(mut socket: TcpStream, shared: &Shared, pipeline: &Mutex<Pipeline>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return respond(&mut socket, "400 Bad Request", "text/plain", b"bad request\n").await;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line =
        String::from_utf8_lossy(&head[..head.iter().position(|&b| b == b'\r').unwrap_or(0)]).into_owned();
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return respond(&mut socket, "405 Method Not Allowed", "text/plain", b"GET only\n").await;
    }
    let path = path.split('?').next().unwrap_or("");
    let (ctype, body) = match path {
        "/healthz" => ("text/plain", b"ok\n".to_vec()),
        "/metrics" => {
            let p = pipeline.lock().unwrap_or_else(|e| e.into_inner());
            ("text/plain; version=0.0.4", metrics::render(&p, shared).into_bytes())
        }
        "/report.json" => ("application/json", json::render(&report(shared, pipeline)).into_bytes()),
        "/report.html" | "/" => {
            ("text/html; charset=utf-8", html::render(&report(shared, pipeline)).into_bytes())
        }
        _ => return respond(&mut socket, "404 Not Found", "text/plain", b"not found\n").await,
    };
    let body = if method == "HEAD" { Vec::new() } else { body };
    respond(&mut socket, "200 OK", ctype, &body).await
}

fn report(shared: &Shared, pipeline: &Mutex<Pipeline>) -> Report {
    let p = pipeline.lock().unwrap_or_else(|e| e.into_inner());
    Report::build(&p, RunFacts { events_dropped: shared.tap.dropped() })
}

async fn respond(socket: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    socket.shutdown().await
}
