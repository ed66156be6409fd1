//! Properties of query shapes over random commands: the text is canonical compact
//! JSON (so a shape id is a function of the shape), no shape of any command carries
//! a literal value, the order of sibling predicates does not split shapes, and a
//! shape remembered by its skeleton is the shape the shaper writes.
//!
//! Each rewrite of the shape code was checked with this generator against the code
//! it replaced, 20,000 random commands each time (same text, same statement counts):
//! from `serde_json::Value` trees to text, and from `bson`'s iterator to
//! `mongotap_wire::element`'s header walk.
use bson::{doc, Bson, Document as BDoc, RawDocumentBuf};
use mongotap_analyzers::shape::command::shapes;
use mongotap_analyzers::shape::memo::Memo;
use mongotap_analyzers::shape::{filter, ShapeJson};
use mongotap_wire::{Command, Document, Frame, Message, OpMsg};
use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b.c".to_string()),
        Just("_id".to_string()),
        Just("é\"\n\\".to_string()),
        Just("$and".to_string()),
        Just("$or".to_string()),
        Just("$nor".to_string()),
        Just("$expr".to_string()),
        Just("$comment".to_string()),
        Just("$gt".to_string()),
        Just("$in".to_string()),
        Just("$elemMatch".to_string()),
        Just("$not".to_string()),
        Just("$regex".to_string()),
        Just("$options".to_string()),
        Just("$exists".to_string()),
        Just("$literal".to_string()),
        Just("$each".to_string()),
        Just("$slice".to_string()),
        Just("$set".to_string()),
        Just("$push".to_string()),
        Just("$addToSet".to_string()),
        Just("$match".to_string()),
        Just("$sort".to_string()),
        Just("$limit".to_string()),
        Just("$lookup".to_string()),
        Just("$graphLookup".to_string()),
        Just("$facet".to_string()),
        Just("$project".to_string()),
        Just("$unwind".to_string()),
        Just("$unionWith".to_string()),
        Just("pipeline".to_string()),
        Just("let".to_string()),
        Just("from".to_string()),
        Just("restrictSearchWithMatch".to_string()),
        Just("startWith".to_string()),
        Just("maxDepth".to_string()),
        Just("$where".to_string()),
        Just("$text".to_string()),
        Just("$all".to_string()),
        Just("$ne".to_string()),
        Just("$nin".to_string()),
        Just("$mod".to_string()),
        Just("$type".to_string()),
        Just("$bitsAllSet".to_string()),
        Just("$near".to_string()),
        Just("$maxDistance".to_string()),
        Just("$geoWithin".to_string()),
        Just("$geometry".to_string()),
        Just("$sampleRate".to_string()),
        Just("$merge".to_string()),
        Just("whenMatched".to_string()),
        Just("$count".to_string()),
        Just("$out".to_string()),
        Just("$meta".to_string()),
        Just("$function".to_string()),
        Just("$accumulator".to_string()),
        Just("$group".to_string()),
        Just("$setWindowFields".to_string()),
        Just("$densify".to_string()),
        Just("$fill".to_string()),
        Just("$bucket".to_string()),
        Just("$replaceRoot".to_string()),
        Just("$addFields".to_string()),
        Just("$redact".to_string()),
        Just("$geoNear".to_string()),
        Just("$search".to_string()),
        Just("lines.3.qty".to_string()),
    ]
}

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        Just(Bson::Double(f64::NAN)),
        Just(Bson::Double(-0.0)),
        Just(Bson::Double(1e300)),
        Just(Bson::Int32(0)),
        Just(Bson::Int32(1)),
        "[a-y$\"é\\\\]{0,6}".prop_map(Bson::String),
        Just(Bson::String("secret".into())),
        // Marked values: none may reach a shape, wherever the command carries them.
        Just(Bson::Int32(MARK_I32)),
        Just(Bson::Int64(MARK_I64)),
        Just(Bson::Double(MARK_F64)),
        Just(Bson::JavaScriptCode("secret()".into())),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        Just(Bson::ObjectId(bson::oid::ObjectId::from_bytes([1; 12]))),
        Just(Bson::RegularExpression(bson::Regex {
            pattern: "^a".to_string().try_into().unwrap(),
            options: "i".to_string().try_into().unwrap()
        })),
        Just(Bson::DateTime(bson::DateTime::from_millis(5))),
        Just(Bson::MinKey),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Bson::Array),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|kv| Bson::Document(kv.into_iter().collect::<BDoc>())),
        ]
    })
}

fn document() -> impl Strategy<Value = BDoc> {
    prop::collection::vec((key(), value()), 0..6).prop_map(|kv| kv.into_iter().collect())
}

const MARK_I32: i32 = 987_654_321;
const MARK_I64: i64 = 9_876_543_210;
const MARK_F64: f64 = 98_765.432_1;

/// Whether a shape's text shows a marked value.
fn leaks(text: &str) -> bool {
    text.contains("secret") || text.contains("98765")
}

/// Whether a command carries the marked string where a name goes (a collection,
/// a field, a path: `from`, `$unwind`, `$count`, ...). Names are kept by design.
fn secret_as_a_name(v: &Bson, under_name: bool) -> bool {
    const NAMES: [&str; 14] = [
        "from",
        "$unwind",
        "$count",
        "$out",
        "$unionWith",
        "$merge",
        "into",
        "on",
        "whenMatched",
        "key",
        "hint",
        "localField",
        "foreignField",
        "as",
    ];
    match v {
        Bson::String(s) => under_name && s.contains("secret"),
        Bson::Array(a) => a.iter().any(|x| secret_as_a_name(x, under_name)),
        Bson::Document(d) => {
            d.iter().any(|(k, x)| secret_as_a_name(x, under_name || NAMES.contains(&k.as_str())))
        }
        _ => false,
    }
}

/// Whether a filter shape's values are all placeholders: no number (but `$type`'s
/// codes) and no string with a digit in it (field names may have digits).
fn no_literal(v: &serde_json::Value, type_codes: bool) -> bool {
    use serde_json::Value;
    match v {
        Value::Number(_) => type_codes,
        Value::String(s) => !s.chars().any(|c| c.is_ascii_digit()),
        Value::Array(a) => a.iter().all(|x| no_literal(x, type_codes)),
        Value::Object(o) => o.iter().all(|(k, x)| no_literal(x, k == "$type")),
        _ => true,
    }
}

fn command() -> impl Strategy<Value = BDoc> {
    let d = document;
    prop_oneof![
        (d(), d(), d(), value(), value()).prop_map(|(f, p, s, l, k)| doc! {"find": "c", "filter": f, "projection": p, "sort": s, "limit": l, "skip": k, "hint": "x", "singleBatch": true, "$db": "t"}),
        (prop::collection::vec(d(), 0..5), value()).prop_map(|(stages, l)| doc! {"aggregate": "c", "pipeline": stages, "let": l, "$db": "t"}),
        (prop::collection::vec(d(), 0..5), prop::collection::vec(value(), 0..3)).prop_map(|(st, docs)| doc! {"aggregate": "c", "pipeline": [{"$match": st.first().cloned().unwrap_or_default()}, {"$lookup": {"from": "x", "let": {"a": "$b"}, "pipeline": st.clone()}}, {"$facet": {"x": st.clone(), "y": docs.first().cloned().unwrap_or(Bson::Null)}}, {"$graphLookup": st.first().cloned().unwrap_or_default()}, {"$project": st.last().cloned().unwrap_or_default()}], "$db": "t"}),
        (d(), value(), value()).prop_map(|(q, u, m)| doc! {"update": "c", "updates": [{"q": q.clone(), "u": u, "multi": m, "upsert": true, "arrayFilters": [q]}], "$db": "t"}),
        (d(), d()).prop_map(|(q, u)| doc! {"update": "c", "updates": [{"q": q, "u": u}], "$db": "t"}),
        prop::collection::vec(d(), 0..4).prop_map(|docs| doc! {"insert": "c", "documents": docs, "$db": "t"}),
        (d(), value()).prop_map(|(q, l)| doc! {"delete": "c", "deletes": [{"q": q, "limit": l}], "$db": "t"}),
        (d(), d(), value(), any::<bool>()).prop_map(|(q, s, u, n)| doc! {"findAndModify": "c", "query": q, "sort": s, "update": u, "new": n, "fields": {"a": 1, "b": {"$slice": 2}}, "$db": "t"}),
        (d(), d(), value()).prop_map(|(q, u, k)| doc! {"count": "c", "query": q, "distinct": "c", "key": k, "$db": "t", "x": u}),
        (d(), d(), d()).prop_map(|(a, b, c)| doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": a}, {"update": 1, "filter": b.clone(), "updateMods": c.clone(), "arrayFilters": [b.clone()], "upsert": true, "q": b.clone(), "u": b}, {"update": 0, "filter": c.clone(), "updateMods": [c.clone()]}, {"delete": 0, "filter": c, "multi": true, "collation": {"locale": "fr", "x": MARK_I32}}, {"weird": 0}], "nsInfo": [{"ns": "t.a"}, {"ns": "t.b"}], "$db": "admin"}),
        (d(), value(), d()).prop_map(|(f, v, l)| doc! {"find": "c", "filter": f, "let": l, "comment": v.clone(), "min": {"a": v.clone()}, "max": {"a": v}, "collation": {"locale": "en", "strength": 2, "mark": MARK_I64}, "$db": "t"}),
        (d(), d()).prop_map(|(q, u)| doc! {"aggregate": "c", "pipeline": [{"$match": q}, {"$group": {"_id": "$a", "n": {"$sum": MARK_I32}, "f": {"$function": {"body": "secret()", "args": [], "lang": "js"}}}}, {"$merge": {"into": "x", "whenMatched": [{"$set": u}]}}], "$db": "t"}),
    ]
}

fn command_view(body: &BDoc) -> Message {
    let bytes = OpMsg::new(Document::from_doc(body)).encode(1, 0);
    Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap()
}

proptest! {
    // XorShift, not proptest's default ChaCha: the unoptimised ChaCha of a test
    // build was two thirds of these tests' time (84 s of CPU, 16 s now).
    #![proptest_config(ProptestConfig {
        cases: 2000,
        max_global_rejects: 1_000_000,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_shape_of_any_command_carries_a_literal(body in command()) {
        prop_assume!(!secret_as_a_name(&Bson::Document(body.clone()), false));
        let m = command_view(&body);
        for s in shapes(&Command::from_message(&m).unwrap()) {
            prop_assert!(!leaks(s.shape.as_str()), "{}\nfrom {}", s.shape.as_str(), body);
        }
    }

    #[test]
    fn shape_text_is_canonical_json(body in command()) {
        let m = command_view(&body);
        for s in shapes(&Command::from_message(&m).unwrap()) {
            prop_assert_eq!(s.shape.to_value().to_string(), s.shape.as_str());
        }
    }

    #[test]
    fn filter_shapes_carry_no_literal_and_ignore_sibling_order(d in document()) {
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        let shape = ShapeJson::build(|o| filter(o, &raw));
        let text = shape.as_str();
        prop_assert!(!leaks(text) && no_literal(&shape.to_value(), false), "{}", text);
        let mut pairs: Vec<(String, Bson)> = d.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        pairs.reverse();
        let reversed: BDoc = pairs.into_iter().collect();
        let raw = RawDocumentBuf::try_from(&reversed).unwrap();
        prop_assert_eq!(ShapeJson::build(|o| filter(o, &raw)), shape);
    }

    #[test]
    fn a_remembered_find_shape_is_the_shape_of_the_find(f in document(), seed in any::<u64>(), p in document(), sort in document()) {
        // The same find with one value changed (four times, a different leaf each
        // time, for one of the same type or not), and the random finds before it,
        // through one memo: a skeleton that passed over a difference the shape keeps
        // would return the earlier shape.
        let f = Bson::Document(f);
        let mut leaves = 0;
        revalue(&f, usize::MAX, 0, &mut leaves);
        let others = [0u64, 1, 2, 3].map(|i| {
            let pick = seed.rotate_left(16 * i as u32);
            revalue(&f, (pick as usize) % leaves.max(1), pick >> 8, &mut 0)
        });
        // A failed case leaves the lock poisoned: the next cases still run.
        let mut memo = MEMO.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for filter in std::iter::once(f.clone()).chain(others) {
            for skip in [Bson::Int32(0), Bson::Int32(20)] {
                let body = doc! {"find": "c", "filter": filter.clone(), "projection": p.clone(), "sort": sort.clone(), "skip": skip, "limit": 1, "singleBatch": seed % 2 == 0, "$db": "t"};
                let m = command_view(&body);
                let c = Command::from_message(&m).unwrap();
                let (a, b) = (memo.shapes(&c).into_owned(), shapes(&c));
                prop_assert_eq!(a, b, "{}", body);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        max_global_rejects: 1_000_000,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_remembered_update_shape_is_the_shape_of_the_update(q in document(), u in document(), seed in any::<u64>()) {
        // The document as a replacement or as operators' paths (`$set`, and
        // `$push`, whose documents may be modifiers), each with one value changed
        // four times, through the memo the finds use too.
        let updates = [Bson::Document(u.clone()), Bson::Document(doc! {"$set": u.clone()}), Bson::Document(doc! {"$push": u})];
        let mut memo = MEMO.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for update in updates {
            let statement = Bson::Document(doc! {"q": q.clone(), "u": update, "multi": seed % 3 == 0, "upsert": seed % 5 == 0});
            let mut leaves = 0;
            revalue(&statement, usize::MAX, 0, &mut leaves);
            let others = [0u64, 1, 2, 3].map(|i| {
                let pick = seed.rotate_left(16 * i as u32);
                revalue(&statement, (pick as usize) % leaves.max(1), pick >> 8, &mut 0)
            });
            for st in std::iter::once(statement.clone()).chain(others) {
                let body = doc! {"update": "c", "updates": [st], "ordered": true, "$db": "t"};
                let m = command_view(&body);
                let c = Command::from_message(&m).unwrap();
                let (a, b) = (memo.shapes(&c).into_owned(), shapes(&c));
                prop_assert_eq!(a, b, "{}", body);
            }
        }
    }
}

/// One memo for every case: skeletons of earlier cases stay to be mistaken.
static MEMO: std::sync::LazyLock<std::sync::Mutex<Memo>> = std::sync::LazyLock::new(Default::default);

/// `v` with its leaf number `at` (counting from `n`) replaced by another value,
/// picked by `pick`: what a shape may keep of a value (a boolean, a regex's flags,
/// zero) or a value of another type.
fn revalue(v: &Bson, at: usize, pick: u64, n: &mut usize) -> Bson {
    match v {
        Bson::Document(d) => {
            Bson::Document(d.iter().map(|(k, x)| (k.clone(), revalue(x, at, pick, n))).collect())
        }
        Bson::Array(a) => Bson::Array(a.iter().map(|x| revalue(x, at, pick, n)).collect()),
        leaf => {
            *n += 1;
            if *n - 1 != at {
                return leaf.clone();
            }
            match (pick % 8, leaf) {
                (0..=3, Bson::Boolean(b)) => Bson::Boolean(!b),
                (0..=3, Bson::RegularExpression(r)) => Bson::RegularExpression(bson::Regex {
                    pattern: r.pattern.clone(),
                    options: if r.options.as_str().is_empty() { "i" } else { "" }
                        .to_string()
                        .try_into()
                        .unwrap(),
                }),
                (0..=3, Bson::Int32(n)) => Bson::Int32(if *n == 0 { 3 } else { 0 }),
                (0, _) => Bson::Int32(7),
                (1, _) => Bson::Int64(8),
                (2, _) => Bson::String("z".into()),
                (3, _) => Bson::Boolean(false),
                (4, _) => Bson::Null,
                (5, _) => Bson::MaxKey,
                (6, _) => Bson::Int32(0),
                _ => Bson::Double(2.5),
            }
        }
    }
}
