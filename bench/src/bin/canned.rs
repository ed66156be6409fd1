//! A canned-reply MongoDB server for benchmarks: answers every OP_MSG with one small
//! `find` batch (hello gets a hello reply) and the OP_QUERY handshake with OP_REPLY.
//! Usage: canned 127.0.0.1:PORT

use bson::doc;
use bytes::BytesMut;
use mongotap_bench::find_reply;
use mongotap_wire::{Command, Document, Frame, Message, OpMsg, OpReply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:27999".into());
    let listener = TcpListener::bind(&addr).await.expect("bind");
    loop {
        let (mut s, _) = listener.accept().await.expect("accept");
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let mut out = Vec::with_capacity(64 * 1024);
            let mut next_id = 1;
            loop {
                if s.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                while let Ok(Some(frame)) = Frame::parse(&mut buf) {
                    next_id += 1;
                    let to = frame.header.request_id;
                    out.extend(reply(&frame, next_id, to));
                }
                if s.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
            }
        });
    }
}

fn reply(frame: &Frame, id: i32, to: i32) -> Vec<u8> {
    let hello = doc! {"isWritablePrimary": true, "ismaster": true, "helloOk": true, "maxBsonObjectSize": 16777216,
    "maxMessageSizeBytes": 48000000, "maxWriteBatchSize": 100000, "minWireVersion": 0, "maxWireVersion": 21,
    "logicalSessionTimeoutMinutes": 30, "connectionId": 1, "ok": 1.0};
    match Message::decode(frame) {
        Ok(m) if matches!(m.op, mongotap_wire::Op::Query(_)) => OpReply {
            response_flags: 0,
            cursor_id: 0,
            starting_from: 0,
            number_returned: 1,
            documents: vec![Document::from_doc(&hello)],
        }
        .encode(id, to)
        .to_vec(),
        Ok(m) if Command::from_message(&m).is_some_and(|c| c.name != "find") => {
            OpMsg::new(Document::from_doc(&hello)).encode(id, to).to_vec()
        }
        _ => find_reply(id, to),
    }
}
