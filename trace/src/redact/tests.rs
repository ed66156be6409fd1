use super::*;
use bson::{doc, Bson, Document as Doc};
use mongotap_wire::{Document, Op, OpMsg};

fn msg(body: Doc, id: i32, to: i32) -> Frame {
    Frame::from_bytes(OpMsg::new(Document::from_doc(&body)).encode(id, to)).unwrap()
}

fn redact(r: &mut Redactor, dir: Direction, f: &Frame) -> Doc {
    match r.message(1, dir, f) {
        Redacted::Kept(b) => {
            let f = Frame::from_bytes(bytes::Bytes::from(b)).unwrap();
            match Message::decode(&f).unwrap().op {
                Op::Msg(m) => m.body().to_document().unwrap(),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn literals_are_replaced_and_names_options_and_sizes_kept() {
    let mut r = Redactor::with_secret(b"k");
    let f = msg(
        doc! {"find": "users", "filter": {"email": "alice@example.com", "age": {"$gt": 30}, "tags": {"$exists": true}},
        "sort": {"age": -1}, "limit": 5, "$db": "shop", "lsid": {"id": 7}},
        1,
        0,
    );
    let out = match r.message(1, Direction::ToServer, &f) {
        Redacted::Kept(b) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(out.len(), f.bytes.len(), "sizes kept");
    assert!(!contains(&out, b"alice@example.com"));
    let d = redact(&mut r, Direction::ToServer, &f);
    assert_eq!(d.get_str("find").unwrap(), "users");
    assert_eq!(d.get_str("$db").unwrap(), "shop");
    assert_eq!(d.get_document("sort").unwrap(), &doc! {"age": -1});
    assert_eq!(d.get_i32("limit").unwrap(), 5);
    let filter = d.get_document("filter").unwrap();
    let email = filter.get_str("email").unwrap();
    assert_eq!(email.len(), "alice@example.com".len());
    assert_ne!(email, "alice@example.com");
    assert_ne!(filter.get_document("age").unwrap().get_i32("$gt").unwrap(), 30);
    assert_eq!(filter.get_document("tags").unwrap(), &doc! {"$exists": true}, "operator arguments kept");
}

#[test]
fn equal_values_stay_equal_across_messages_and_numeric_types() {
    let mut r = Redactor::with_secret(b"k");
    let oid = bson::oid::ObjectId::new();
    let reply = redact(
        &mut r,
        Direction::ToClient,
        &msg(
            doc! {"cursor": {"firstBatch": [{"_id": 1, "authorId": oid, "n": 5i64}], "id": 0i64, "ns": "b.posts"}, "ok": 1.0},
            2,
            1,
        ),
    );
    let child = redact(
        &mut r,
        Direction::ToServer,
        &msg(doc! {"find": "authors", "filter": {"_id": oid, "n": 5}, "$db": "b"}, 3, 0),
    );
    let first = &reply.get_document("cursor").unwrap().get_array("firstBatch").unwrap()[0];
    let first = first.as_document().unwrap();
    let filter = child.get_document("filter").unwrap();
    assert_eq!(first.get("authorId"), filter.get("_id"));
    assert_ne!(first.get_object_id("authorId").unwrap(), oid);
    assert_eq!(first.get_i64("n").unwrap(), i64::from(filter.get_i32("n").unwrap()), "5i64 and 5 stay equal");
    assert_eq!(reply.get_document("cursor").unwrap().get_str("ns").unwrap(), "b.posts");
    // Under another secret, the same value hashes differently: traces do not correlate.
    let mut other = Redactor::with_secret(b"other");
    let child2 = redact(
        &mut other,
        Direction::ToServer,
        &msg(doc! {"find": "authors", "filter": {"_id": oid}, "$db": "b"}, 3, 0),
    );
    assert_ne!(child2.get_document("filter").unwrap().get("_id"), filter.get("_id"));
}

#[test]
fn small_numbers_stay_small_distinct_and_of_their_sign() {
    let r = Redactor::with_secret(b"k");
    let small: std::collections::HashSet<i32> = (-999..1000).map(|v| r.number(v)).collect();
    assert_eq!(small.len(), 1999, "no two small numbers share a stand-in");
    assert!((0..1000).all(|v| (0..1000).contains(&r.number(v))));
    assert!((-999..0).all(|v| (-999..0).contains(&r.number(v))));
    assert!((0..100).any(|v| r.number(v) != v as i32), "shuffled");
    for v in [1000, -1000, 1 << 40, i64::MIN, i64::MAX] {
        assert!(r.number(v) >= 1000, "{v} is no small number and gets none");
    }
    assert_eq!(r.double(7.0), f64::from(r.number(7)), "a whole double is the same number");
}

#[test]
fn updates_keep_their_operators_and_slice_and_pipelines_their_links() {
    let mut r = Redactor::with_secret(b"k");
    let u = redact(
        &mut r,
        Direction::ToServer,
        &msg(
            doc! {"update": "posts", "updates": [{"q": {"_id": 9}, "u": {"$push": {"comments": {"$each": [{"text": "hi there"}], "$slice": -10}}}, "upsert": true}], "$db": "b"},
            1,
            0,
        ),
    );
    let stmt = u.get_array("updates").unwrap()[0].as_document().unwrap().clone();
    assert!(stmt.get_bool("upsert").unwrap());
    let push =
        stmt.get_document("u").unwrap().get_document("$push").unwrap().get_document("comments").unwrap();
    assert_eq!(push.get_i32("$slice").unwrap(), -10);
    let text = push.get_array("$each").unwrap()[0].as_document().unwrap().get_str("text").unwrap();
    assert_ne!(text, "hi there");

    let a = redact(
        &mut r,
        Direction::ToServer,
        &msg(
            doc! {"aggregate": "orders", "pipeline": [
                {"$match": {"status": "open", "name": {"$regex": "^abc"}}},
                {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
                {"$group": {"_id": "$customerId", "n": {"$sum": 1}}},
                {"$limit": 10}
            ], "cursor": {}, "$db": "shop"},
            1,
            0,
        ),
    );
    let p = a.get_array("pipeline").unwrap();
    let m = p[0].as_document().unwrap().get_document("$match").unwrap();
    assert_ne!(m.get_str("status").unwrap(), "open");
    assert!(m.get_document("name").unwrap().get_str("$regex").unwrap().starts_with('^'), "the anchor stays");
    assert_eq!(
        p[1].as_document().unwrap().get_document("$lookup").unwrap(),
        &doc! {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}
    );
    assert_eq!(p[2].as_document().unwrap(), &doc! {"$group": {"_id": "$customerId", "n": {"$sum": 1}}});
    assert_eq!(p[3].as_document().unwrap(), &doc! {"$limit": 10});
}

#[test]
fn auth_keeps_only_its_name_and_its_reply_only_ok() {
    let mut r = Redactor::with_secret(b"k");
    let f = msg(
        doc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"n,,n=alice,r=secretnonce".to_vec() }), "$db": "admin"},
        5,
        0,
    );
    match r.message(1, Direction::ToServer, &f) {
        Redacted::Kept(b) => assert!(!contains(&b, b"alice") && !contains(&b, b"secretnonce")),
        other => panic!("{other:?}"),
    }
    let d = redact(&mut r, Direction::ToServer, &f);
    assert_eq!(d, doc! {"saslStart": 1, "$db": "admin"});
    let reply =
        msg(doc! {"conversationId": 1, "done": false, "payload": "r=secretnonce,s=salt", "ok": 1.0}, 6, 5);
    assert_eq!(redact(&mut r, Direction::ToClient, &reply), doc! {"ok": 1.0});

    let hello = msg(
        doc! {"hello": 1, "client": {"application": {"name": "shop"}}, "speculativeAuthenticate": {"saslStart": 1, "payload": "n=alice"}, "$db": "admin"},
        7,
        0,
    );
    let h = redact(&mut r, Direction::ToServer, &hello);
    assert_eq!(h.get_document("speculativeAuthenticate").unwrap(), &doc! {});
    let named = msg(doc! {"hello": 1, "saslSupportedMechs": "admin.alice", "$db": "admin"}, 9, 0);
    for mut r in [Redactor::with_secret(b"k"), Redactor::auth_only()] {
        assert_eq!(
            redact(&mut r, Direction::ToServer, &named),
            doc! {"hello": 1, "$db": "admin"},
            "no user name"
        );
    }
    assert_eq!(h.get_document("client").unwrap(), &doc! {"application": {"name": "shop"}});
    let hr = msg(
        doc! {"isWritablePrimary": true, "speculativeAuthenticate": {"payload": "secretnonce"}, "ok": 1.0},
        8,
        7,
    );
    assert_eq!(redact(&mut r, Direction::ToClient, &hr), doc! {"ok": 1.0});
}

#[test]
fn wrapped_commands_user_names_and_unmatched_auth_replies_are_not_kept() {
    let mut r = Redactor::with_secret(b"k");
    let e = redact(
        &mut r,
        Direction::ToServer,
        &msg(
            doc! {"explain": {"find": "users", "filter": {"email": "alice@x.org"}}, "verbosity": "queryPlanner", "$db": "d"},
            1,
            0,
        ),
    );
    let inner = e.get_document("explain").unwrap();
    assert_eq!(inner.get_str("find").unwrap(), "users", "the wrapped command's name is kept");
    assert_ne!(inner.get_document("filter").unwrap().get_str("email").unwrap(), "alice@x.org");
    let u = redact(&mut r, Direction::ToServer, &msg(doc! {"usersInfo": "alice", "$db": "admin"}, 2, 0));
    assert_ne!(u.get_str("usersInfo").unwrap(), "alice");
    // A SASL reply or a speculative hello reply whose request the trace never saw.
    let sasl =
        msg(doc! {"conversationId": 1, "done": false, "payload": "r=nonce,s=salt,i=15000", "ok": 1.0}, 3, 99);
    assert_eq!(redact(&mut r, Direction::ToClient, &sasl), doc! {"ok": 1.0});
    let hello = msg(
        doc! {"isWritablePrimary": true, "speculativeAuthenticate": {"dbname": "$external", "user": "CN=alice"}, "ok": 1.0},
        4,
        98,
    );
    assert_eq!(redact(&mut r, Direction::ToClient, &hello), doc! {"ok": 1.0});
    let mut raw = Redactor::auth_only();
    assert_eq!(redact(&mut raw, Direction::ToClient, &sasl), doc! {"ok": 1.0});
}

#[test]
fn update_pipelines_meta_keywords_and_killed_cursors_keep_what_shapes_read() {
    let mut r = Redactor::with_secret(b"k");
    let u = redact(
        &mut r,
        Direction::ToServer,
        &msg(
            doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"total": {"$add": ["$price", "$tax"]}, "tag": "vip"}}]}], "$db": "d"},
            1,
            0,
        ),
    );
    let set = u.get_array("updates").unwrap()[0].as_document().unwrap().get_array("u").unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("$set")
        .unwrap()
        .clone();
    assert_eq!(set.get_document("total").unwrap(), &doc! {"$add": ["$price", "$tax"]});
    assert_ne!(set.get_str("tag").unwrap(), "vip");
    let a = redact(
        &mut r,
        Direction::ToServer,
        &msg(
            doc! {"aggregate": "c", "pipeline": [{"$project": {"score": {"$meta": "textScore"}}}], "cursor": {}, "$db": "d"},
            2,
            0,
        ),
    );
    assert_eq!(
        a.get_array("pipeline").unwrap()[0].as_document().unwrap(),
        &doc! {"$project": {"score": {"$meta": "textScore"}}}
    );
    let k = redact(
        &mut r,
        Direction::ToServer,
        &msg(doc! {"killCursors": "c", "cursors": [12345i64], "$db": "d"}, 3, 0),
    );
    assert_eq!(k.get_array("cursors").unwrap(), &vec![Bson::Int64(12345)]);
}

#[test]
fn a_code_with_scope_whose_lengths_lie_is_not_kept_and_nothing_panics() {
    let mut r = Redactor::with_secret(b"k");
    let f = msg(
        doc! {"find": "c", "filter": {"x": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope { code: "1".into(), scope: doc! {} })}, "$db": "d"},
        1,
        0,
    );
    assert!(matches!(r.message(1, Direction::ToServer, &f), Redacted::Kept(_)), "a sound one is kept");
    let mut b = f.bytes.to_vec();
    // The code string's own length (after the element's total length) set to 0.
    let i = b.windows(2).position(|w| w == b"x\0").unwrap() + 2 + 4;
    for bad in [0i32, -5, 1_000] {
        b[i..i + 4].copy_from_slice(&bad.to_le_bytes());
        let bad = Frame::from_bytes(bytes::Bytes::from(b.clone())).unwrap();
        assert!(matches!(r.message(1, Direction::ToServer, &bad), Redacted::Dropped(_)));
    }
}

#[test]
fn raw_traces_keep_values_but_still_reduce_auth() {
    let mut r = Redactor::auth_only();
    let find = msg(doc! {"find": "c", "filter": {"email": "alice@example.com"}, "$db": "d"}, 1, 0);
    assert!(matches!(r.message(1, Direction::ToServer, &find), Redacted::Unchanged));
    let sasl = msg(
        doc! {"saslContinue": 1, "conversationId": 1, "payload": "c=biws,r=nonce,p=proof", "$db": "admin"},
        2,
        0,
    );
    assert_eq!(redact(&mut r, Direction::ToServer, &sasl), doc! {"saslContinue": 1, "$db": "admin"});
    let reply = msg(doc! {"conversationId": 1, "done": true, "payload": "v=signature", "ok": 1.0}, 3, 2);
    assert_eq!(redact(&mut r, Direction::ToClient, &reply), doc! {"ok": 1.0});
}

#[test]
fn checksums_are_recomputed_and_compressed_messages_inflated() {
    let mut r = Redactor::with_secret(b"k");
    let mut m = OpMsg::new(Document::from_doc(&doc! {"find": "c", "filter": {"a": "secret"}, "$db": "d"}));
    m.flags = MsgFlags::CHECKSUM_PRESENT;
    let f = Frame::from_bytes(m.encode(1, 0)).unwrap();
    let out = match r.message(1, Direction::ToServer, &f) {
        Redacted::Kept(b) => b,
        other => panic!("{other:?}"),
    };
    let back = Frame::from_bytes(bytes::Bytes::from(out)).unwrap();
    Message::decode(&back).expect("the checksum matches the new bytes");

    let z = OpCompressed::compress(&f.bytes, mongotap_wire::Compressor::Zstd);
    let zf = Frame::from_bytes(z).unwrap();
    match r.message(1, Direction::ToServer, &zf) {
        Redacted::Kept(b) => {
            assert_eq!(b.len(), f.bytes.len(), "stored inflated");
            assert!(!contains(&b, b"secret"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bson_that_does_not_walk_is_not_kept() {
    let mut r = Redactor::with_secret(b"k");
    let f = msg(doc! {"find": "c", "filter": {"a": "x"}, "$db": "d"}, 1, 0);
    let mut b = f.bytes.to_vec();
    // The filter's string claims more bytes than there are.
    let i = b.windows(2).position(|w| w == b"a\0").unwrap() + 2;
    b[i..i + 4].copy_from_slice(&1000i32.to_le_bytes());
    let bad = Frame::from_bytes(bytes::Bytes::from(b)).unwrap();
    assert!(matches!(r.message(1, Direction::ToServer, &bad), Redacted::Dropped(_)));
}
