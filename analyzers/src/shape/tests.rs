use super::*;
use bson::{doc, RawDocumentBuf};
use serde_json::json;
use serde_json::Value;

fn raw(d: bson::Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).unwrap()
}

fn text(write: impl FnOnce(&mut Vec<u8>)) -> Value {
    ShapeJson::build(write).to_value()
}

fn f(d: bson::Document) -> Value {
    text(|o| filter(o, &raw(d)))
}

#[test]
fn literals_become_placeholders_and_equality_is_explicit() {
    assert_eq!(f(doc! {"a": 5}), json!({"a": {"$eq": "?number"}}));
    assert_eq!(f(doc! {"a": 5}), f(doc! {"a": 6.5}));
    assert_ne!(f(doc! {"a": 5}), f(doc! {"a": {"$gt": 5}}));
    assert_eq!(f(doc! {"a": {"$gt": 5}}), json!({"a": {"$gt": "?number"}}));
    assert_eq!(
        f(doc! {"s": "x", "o": bson::oid::ObjectId::new()}),
        json!({"$and": [
        {"o": {"$eq": "?objectId"}}, {"s": {"$eq": "?string"}}]})
    );
    assert_eq!(
        f(doc! {"n": null, "b": true}),
        json!({"$and": [{"b": {"$eq": "?bool"}}, {"n": {"$eq": "?null"}}]})
    );
    assert_eq!(f(doc! {}), json!({}));
}

#[test]
fn sibling_order_does_not_split_shapes() {
    assert_eq!(f(doc! {"a": 1, "b": "x"}), f(doc! {"b": "y", "a": 2}));
    assert_eq!(
        f(doc! {"customerId": 1, "status": "open"}),
        json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]})
    );
}

#[test]
fn in_of_any_length_is_one_shape() {
    let one = f(doc! {"a": {"$in": [1]}});
    assert_eq!(one, json!({"a": {"$in": "?array<?number>"}}));
    assert_eq!(one, f(doc! {"a": {"$in": [1, 2, 3, 4, 5, 6, 7]}}));
    assert_eq!(f(doc! {"a": {"$in": [1, "x"]}}), json!({"a": {"$in": "?array<>"}}));
    assert_eq!(f(doc! {"a": {"$in": []}}), json!({"a": {"$in": "[]"}}));
}

#[test]
fn several_operators_on_one_field_split_into_and() {
    assert_eq!(
        f(doc! {"a": {"$gte": 1, "$lt": 9}}),
        json!({"$and": [{"a": {"$gte": "?number"}}, {"a": {"$lt": "?number"}}]})
    );
}

#[test]
fn and_or_nesting_and_dotted_paths() {
    let s = f(doc! {"$or": [{"a.b": 1}, {"c": {"$exists": true}}], "d": "x"});
    assert_eq!(
        s,
        json!({"$and": [
            {"$or": [{"a.b": {"$eq": "?number"}}, {"c": {"$exists": "?bool"}}]},
            {"d": {"$eq": "?string"}}
        ]})
    );
    // An explicit $and is the same shape as implicit siblings.
    assert_eq!(f(doc! {"$and": [{"a": 1}, {"b": 2}]}), f(doc! {"a": 1, "b": 2}));
    assert_eq!(f(doc! {"$or": [{"x": 1}, {"y": 1}]}), f(doc! {"$or": [{"y": 2}, {"x": 3}]}));
}

#[test]
fn arrays_as_values_and_elem_match() {
    assert_eq!(f(doc! {"tags": ["a", "b"]}), json!({"tags": {"$eq": "?array<?string>"}}));
    assert_eq!(
        f(doc! {"items": {"$elemMatch": {"sku": "x", "qty": {"$gt": 1}}}}),
        json!({"items": {"$elemMatch": {"$and": [{"qty": {"$gt": "?number"}}, {"sku": {"$eq": "?string"}}]}}})
    );
    assert_eq!(
        f(doc! {"scores": {"$elemMatch": {"$gte": 80, "$lt": 90}}}),
        json!({"scores": {"$elemMatch": {"$gte": "?number", "$lt": "?number"}}})
    );
    assert_eq!(f(doc! {"a": {"$not": {"$gt": 3}}}), json!({"a": {"$not": {"$gt": "?number"}}}));
}

#[test]
fn regex_operator_and_regex_literal() {
    let re = bson::Regex {
        pattern: "^ab".to_string().try_into().unwrap(),
        options: "i".to_string().try_into().unwrap(),
    };
    let lit = f(doc! {"name": re});
    assert_eq!(lit, json!({"name": {"$regex": "?string", "$options": "?string"}}));
    assert_eq!(f(doc! {"name": {"$regex": "^ab"}}), json!({"name": {"$regex": "?string"}}));
    assert_eq!(
        f(doc! {"name": {"$regex": "^ab", "$options": "i"}}),
        json!({"name": {"$regex": "?string", "$options": "?string"}})
    );
}

#[test]
fn expr_keeps_field_paths_and_hides_literals() {
    assert_eq!(
        f(doc! {"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", 1.5]}]}}),
        json!({"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", "?number"]}]}})
    );
}

#[test]
fn pipelines_with_lookup_sub_pipelines() {
    let p = raw(doc! {"p": [
        {"$match": {"status": "open", "total": {"$gt": 100}}},
        {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
        {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
            {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": 5}], "as": "items"}},
        {"$sort": {"total": -1}},
        {"$limit": 10},
        {"$project": {"total": 1, "label": {"$concat": ["$name", " - VIP"]}}}
    ]});
    let shaped = text(|o| pipeline(o, element::find(&p, "p").unwrap()));
    assert_eq!(
        shaped,
        json!([
            {"$match": {"$and": [{"status": {"$eq": "?string"}}, {"total": {"$gt": "?number"}}]}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
            {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": "?number"}], "as": "items"}},
            {"$sort": {"total": -1}},
            {"$limit": "?number"},
            {"$project": {"total": true, "label": {"$concat": ["$name", "?string"]}, "_id": true}}
        ])
    );
}

#[test]
fn merge_keeps_names_and_shapes_its_pipeline() {
    let p = raw(doc! {"p": [
        {"$merge": {"into": {"db": "reports", "coll": "totals"}, "on": ["region", "day"],
                    "let": {"secret": "hunter2"},
                    "whenMatched": [{"$set": {"note": "hunter2", "n": {"$add": ["$n", 41]}}}],
                    "whenNotMatched": "insert"}},
        {"$sortByCount": {"$concat": ["$a", "hunter2"]}}
    ]});
    let shaped = text(|o| pipeline(o, element::find(&p, "p").unwrap())).to_string();
    assert!(!shaped.contains("hunter2") && !shaped.contains("41"), "{shaped}");
    assert!(shaped.contains("totals") && shaped.contains("region") && shaped.contains("insert"), "{shaped}");
}

#[test]
fn update_kinds() {
    let ops = raw(
        doc! {"u": {"$set": {"a": 1, "b.c": "x"}, "$inc": {"n": 1}, "$push": {"log": {"$each": [1], "$slice": -10}}}},
    );
    assert_eq!(
        text(|o| update_kind(o, element::find(&ops, "u").unwrap())),
        json!({"operators": {"$set": ["a", "b.c"], "$inc": ["n"], "$push": [{"log": ["$each", "$slice"]}]}})
    );
    let rep = raw(doc! {"u": {"_id": 1, "name": "x", "lines": [1, 2]}});
    assert_eq!(
        text(|o| update_kind(o, element::find(&rep, "u").unwrap())),
        json!({"replacement": {"_id": "?number", "name": "?string", "lines": "?array<?number>"}})
    );
    let pipe = raw(doc! {"u": [{"$set": {"total": {"$sum": "$lines.price"}}}]});
    assert_eq!(
        text(|o| update_kind(o, element::find(&pipe, "u").unwrap())),
        json!({"pipeline": [{"$set": {"total": {"$sum": "$lines.price"}}}]})
    );
}

#[test]
fn array_positions_and_data_keys_in_update_paths_are_one_code_path() {
    let u = |d: bson::Document| {
        let r = raw(doc! {"u": d});
        text(|o| update_kind(o, element::find(&r, "u").unwrap()))
    };
    let at3 = u(doc! {"$set": {"lines.3.qty": 1}, "$inc": {"lines.3.n": 1}});
    assert_eq!(at3, u(doc! {"$set": {"lines.12.qty": 5}, "$inc": {"lines.0.n": 2}}));
    assert_eq!(at3, json!({"operators": {"$set": ["lines.?index.qty"], "$inc": ["lines.?index.n"]}}));
    assert_eq!(
        u(doc! {"$inc": {"daily.2024-05-01.views": 1, "byUser.65f1c0ffee0123456789abcd": 1,
        "bySession.0b6e3f4a-58b4-4c39-9d5c-2a1b3c4d5e6f": 1}}),
        json!({"operators": {"$inc": ["daily.?key.views", "byUser.?key", "bySession.?key"]}})
    );
    // Names stay names, digits in them included.
    assert_eq!(u(doc! {"$set": {"address2.line1": 1}}), json!({"operators": {"$set": ["address2.line1"]}}));
    // A document keyed by data is one shape, whatever its keys.
    let d = |d: bson::Document| text(|o| document_fields(o, &raw(d)));
    assert_eq!(
        d(doc! {"sensor": 1, "2024-05-01": 3, "2024-05-02": 4}),
        json!({"sensor": "?number", "?key": "?number"})
    );
    assert_eq!(d(doc! {"sensor": 1, "2024-06-01": 3}), d(doc! {"sensor": 2, "2024-07-09": 1}));
}

#[test]
fn projections_and_fingerprints() {
    assert_eq!(
        text(|o| projection(o, &raw(doc! {"a": 1, "c": true}))),
        json!({"a": true, "c": true, "_id": true})
    );
    assert_eq!(text(|o| projection(o, &raw(doc! {"a": 1, "_id": 1}))), json!({"a": true, "_id": true}));
    assert_eq!(text(|o| projection(o, &raw(doc! {"_id": 0, "a": 1}))), json!({"_id": false, "a": true}));
    assert_eq!(text(|o| projection(o, &raw(doc! {"b": 0}))), json!({"b": false}));
    let a = fingerprint(&["shop.orders", "find", "{}"]);
    assert_eq!(a, fingerprint(&["shop.orders", "find", "{}"]));
    assert_ne!(a, fingerprint(&["shop.orders", "find", "{ }"]));
    assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
    assert_eq!(a.len(), 16);
    // Pinned: the fingerprint must not change between versions or machines.
    assert_eq!(fingerprint(&["x"]), "08f1c907b58eba68");
    // Streaming a shape equals hashing its text.
    let shape = json!({"filter": {"a": {"$eq": "?number"}}, "limit": true});
    let written = ShapeJson::build(|o| o.extend_from_slice(shape.to_string().as_bytes()));
    let streamed = Fingerprint::new().part("t.c").part("find").shape(&written).finish();
    assert_eq!(hex(streamed), fingerprint(&["t.c", "find", &shape.to_string()]));
}
