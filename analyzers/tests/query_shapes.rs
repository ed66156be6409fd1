//! Filter shapes against the MongoDB server's own: each case is an input filter
//! and the shape the server's `$queryStats` writes for it (debug type strings),
//! taken from the server's `src/mongo/db/query/query_shape/query_shape_test.cpp`,
//! the match expressions' `serialize` methods, `expression_geo_test.cpp` and the
//! `jstests/noPassthrough/queryStats/` tests named beside each case.
//!
//! Where mongotap differs on purpose, the case says so and pins mongotap's form:
//! sibling predicates are sorted and an explicit `$and` joins the implicit one,
//! so the order a driver or ODM writes keys in never splits one access pattern
//! into several rows (the server's shape hash does split them).

use bson::{
    doc, spec::BinarySubtype, Binary, Bson, Document, JavaScriptCodeWithScope, RawDocumentBuf, Regex,
};
use mongotap_analyzers::shape::{filter, ShapeJson};
use serde_json::{json, Value};

fn shape(d: Document) -> Value {
    let raw = RawDocumentBuf::try_from(&d).unwrap();
    ShapeJson::build(|o| filter(o, &raw)).to_value()
}

fn re(pattern: &str, options: &str) -> Bson {
    Bson::RegularExpression(Regex {
        pattern: pattern.to_string().try_into().unwrap(),
        options: options.to_string().try_into().unwrap(),
    })
}

#[test]
fn filters_are_shaped_as_the_server_shapes_them() {
    let bin = |bytes: &[u8]| Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: bytes.to_vec() });
    let cases: Vec<(&str, Document, Value)> = vec![
        ("Equals", doc! {"a": 5}, json!({"a": {"$eq": "?number"}})),
        ("Equals, explicit", doc! {"a": {"$eq": 5}}, json!({"a": {"$eq": "?number"}})),
        ("Regex: a regex literal", doc! {"a": re("abc", "")}, json!({"a": {"$regex": "?string"}})),
        (
            "Regex: with flags",
            doc! {"a": re("abc", "i")},
            json!({"a": {"$regex": "?string", "$options": "?string"}}),
        ),
        (
            "parseRegexDocument",
            doc! {"a": {"$regex": "abc", "$options": "i"}},
            json!({"a": {"$regex": "?string", "$options": "?string"}}),
        ),
        (
            "parseRegexDocument, options first",
            doc! {"a": {"$options": "i", "$regex": "abc"}},
            json!({"a": {"$regex": "?string", "$options": "?string"}}),
        ),
        (
            "empty $options are not written",
            doc! {"a": {"$regex": "abc", "$options": ""}},
            json!({"a": {"$regex": "?string"}}),
        ),
        (
            "$regex holding a regex brings its flags",
            doc! {"a": {"$regex": re("abc", "i")}},
            json!({"a": {"$regex": "?string", "$options": "?string"}}),
        ),
        ("query_stats_regex.js", doc! {"foo": {"$regex": "/^ABC/i"}}, json!({"foo": {"$regex": "?string"}})),
        ("$eq holding a regex", doc! {"a": {"$eq": re("x", "")}}, json!({"a": {"$eq": "?regex"}})),
        ("Mod", doc! {"a": {"$mod": [4, 0]}}, json!({"a": {"$mod": ["?number", "?number"]}})),
        (
            "BitTestOperators: number mask",
            doc! {"a": {"$bitsAllSet": 5}},
            json!({"a": {"$bitsAllSet": "?array<?number>"}}),
        ),
        (
            "BitTestOperators: positions",
            doc! {"a": {"$bitsAllSet": [1, 5]}},
            json!({"a": {"$bitsAllSet": "?array<?number>"}}),
        ),
        (
            "BitTestOperators: BinData",
            doc! {"a": {"$bitsAnyClear": bin(&[1])}},
            json!({"a": {"$bitsAnyClear": "?array<?number>"}}),
        ),
        ("BitTestOperators: no bit", doc! {"a": {"$bitsAllSet": 0}}, json!({"a": {"$bitsAllSet": "[]"}})),
        (
            "BitTestOperators: no position",
            doc! {"a": {"$bitsAnySet": []}},
            json!({"a": {"$bitsAnySet": "[]"}}),
        ),
        (
            "BitTestOperators: zero bytes",
            doc! {"a": {"$bitsAllClear": bin(&[0, 0])}},
            json!({"a": {"$bitsAllClear": "[]"}}),
        ),
        ("ArraySubTypes: empty", doc! {"a": []}, json!({"a": {"$eq": "[]"}})),
        ("ArraySubTypes: numbers", doc! {"a": [2, 3]}, json!({"a": {"$eq": "?array<?number>"}})),
        ("ArraySubTypes: objects", doc! {"a": [{}, {}]}, json!({"a": {"$eq": "?array<?object>"}})),
        ("ArraySubTypes: arrays", doc! {"a": [[2, 3], ["s"], []]}, json!({"a": {"$eq": "?array<?array>"}})),
        ("ArraySubTypes: mixed", doc! {"a": [{}, 2]}, json!({"a": {"$eq": "?array<>"}})),
        ("determineArraySubType: raw types", doc! {"a": [1_i32, 2.5]}, json!({"a": {"$eq": "?array<>"}})),
        ("In: empty", doc! {"a": {"$in": []}}, json!({"a": {"$in": "[]"}})),
        ("In: one", doc! {"a": {"$in": [1]}}, json!({"a": {"$in": "?array<?number>"}})),
        ("In: any length", doc! {"a": {"$in": [1, 2, 3]}}, json!({"a": {"$in": "?array<?number>"}})),
        ("In: mixed", doc! {"a": {"$in": [1, "x"]}}, json!({"a": {"$in": "?array<>"}})),
        (
            "InListData::getFirstOfEachType",
            doc! {"a": {"$in": [1_i32, 2.5, 3_i64]}},
            json!({"a": {"$in": "?array<?number>"}}),
        ),
        (
            "In: regexes",
            doc! {"a": {"$in": [re("x", ""), re("y", "")]}},
            json!({"a": {"$in": "?array<?regex>"}}),
        ),
        ("NOT_IN", doc! {"a": {"$nin": [1]}}, json!({"a": {"$not": {"$in": "?array<?number>"}}})),
        ("NOT_EQUAL", doc! {"a": {"$ne": 1}}, json!({"a": {"$not": {"$eq": "?number"}}})),
        ("Size", doc! {"a": {"$size": 3}}, json!({"a": {"$size": "?number"}})),
        (
            "TypeMatchExpression: codes, not data",
            doc! {"a": {"$type": "string"}},
            json!({"a": {"$type": [2]}}),
        ),
        (
            "MatcherTypeSet::toBSONArray",
            doc! {"a": {"$type": [2, "number"]}},
            json!({"a": {"$type": ["number", 2]}}),
        ),
        (
            "MatcherTypeSet: sorted, once",
            doc! {"a": {"$type": ["objectId", 2, "string"]}},
            json!({"a": {"$type": [2, 7]}}),
        ),
        ("Exists", doc! {"a": {"$exists": true}}, json!({"a": {"$exists": "?bool"}})),
        ("Exists: a number", doc! {"a": {"$exists": 1}}, json!({"a": {"$exists": "?bool"}})),
        (
            "Exists: false is NOT(EXISTS)",
            doc! {"a": {"$exists": false}},
            json!({"a": {"$not": {"$exists": "?bool"}}}),
        ),
        ("Exists: zero", doc! {"a": {"$exists": 0}}, json!({"a": {"$not": {"$exists": "?bool"}}})),
        (
            "parseAll",
            doc! {"a": {"$all": [1, 2]}},
            json!({"$and": [{"a": {"$eq": "?number"}}, {"a": {"$eq": "?number"}}]}),
        ),
        ("parseAll: empty", doc! {"a": {"$all": []}}, json!({"$alwaysFalse": "?number"})),
        (
            "parseAll: $elemMatch",
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}]}},
            json!({"a": {"$elemMatch": {"b": {"$eq": "?number"}}}}),
        ),
        (
            "ElemMatch: values",
            doc! {"a": {"$elemMatch": {"$gt": 5, "$lt": 10}}},
            json!({"a": {"$elemMatch": {"$gt": "?number", "$lt": "?number"}}}),
        ),
        (
            "ElemMatch: objects",
            doc! {"a": {"$elemMatch": {"b": 1}}},
            json!({"a": {"$elemMatch": {"b": {"$eq": "?number"}}}}),
        ),
        (
            "ElemMatch: nested",
            doc! {"a": {"$elemMatch": {"$elemMatch": {"$gt": 5}}}},
            json!({"a": {"$elemMatch": {"$elemMatch": {"$gt": "?number"}}}}),
        ),
        (
            "ElemMatch: values with $ne",
            doc! {"a": {"$elemMatch": {"$ne": 5}}},
            json!({"a": {"$elemMatch": {"$not": {"$eq": "?number"}}}}),
        ),
        ("NotMatchExpression", doc! {"a": {"$not": {"$gt": 1}}}, json!({"a": {"$not": {"$gt": "?number"}}})),
        (
            "serializeNotExpressionToNor",
            doc! {"a": {"$not": {"$gt": 1, "$lt": 5}}},
            json!({"$nor": [{"$and": [{"a": {"$gt": "?number"}}, {"a": {"$lt": "?number"}}]}]}),
        ),
        (
            "parseNot: a regex",
            doc! {"a": {"$not": re("x", "")}},
            json!({"a": {"$not": {"$regex": "?string"}}}),
        ),
        (
            "parseNot: a regex with flags",
            doc! {"a": {"$not": re("x", "i")}},
            json!({"a": {"$not": {"$regex": "?string", "$options": "?string"}}}),
        ),
        (
            "parseNot: $regex and $options",
            doc! {"a": {"$not": {"$regex": "x", "$options": "i"}}},
            json!({"a": {"$not": {"$regex": "?string", "$options": "?string"}}}),
        ),
        ("null", doc! {"a": null}, json!({"a": {"$eq": "?null"}})),
        ("$eq null", doc! {"a": {"$eq": null}}, json!({"a": {"$eq": "?null"}})),
        ("an object is a value", doc! {"a": {"b": 1}}, json!({"a": {"$eq": "?object"}})),
        ("isDBRefDocument", doc! {"a": {"$ref": "c", "$id": 1}}, json!({"a": {"$eq": "?object"}})),
        ("MinKey", doc! {"a": {"$lt": Bson::MinKey}}, json!({"a": {"$lt": "?minKey"}})),
        ("AlwaysBoolean", doc! {"$alwaysTrue": 1}, json!({"$alwaysTrue": "?number"})),
        ("WhereMatchExpression: a string", doc! {"$where": "some_code()"}, json!({"$where": "?javascript"})),
        (
            "WhereMatchExpression: code",
            doc! {"$where": Bson::JavaScriptCode("f()".into())},
            json!({"$where": "?javascript"}),
        ),
        (
            "TextMatchExpression",
            doc! {"$text": {"$search": "x"}},
            json!({"$text": {"$search": "?string", "$language": "?string", "$caseSensitive": "?bool", "$diacriticSensitive": "?bool"}}),
        ),
        ("$expr", doc! {"$expr": {"$eq": ["$a", 2]}}, json!({"$expr": {"$eq": ["$a", "?number"]}})),
        (
            "ExpressionArray: constants are one",
            doc! {"$expr": {"$in": ["$a", [1, 2, 3]]}},
            json!({"$expr": {"$in": ["$a", "?array<?number>"]}}),
        ),
        (
            "ExpressionVariadic: constant arguments",
            doc! {"$expr": {"$add": [1, 2]}},
            json!({"$expr": {"$add": "?array<?number>"}}),
        ),
        (
            "ExpressionConstant::serializeConstant",
            doc! {"$expr": {"$eq": ["$a", {"$literal": 5}]}},
            json!({"$expr": {"$eq": ["$a", "?number"]}}),
        ),
        (
            "query_stats_expressions.js: $meta",
            doc! {"$expr": {"k": {"$meta": "indexKey"}}},
            json!({"$expr": {"k": {"$meta": "indexKey"}}}),
        ),
        (
            "query_stats_expressions.js: $regexMatch",
            doc! {"$expr": {"r": {"$regexMatch": {"input": "$w", "regex": "^a"}}}},
            json!({"$expr": {"r": {"$regexMatch": {"input": "$w", "regex": "?string"}}}}),
        ),
        (
            "SerializeGeoExpressions: $geoWithin",
            doc! {"a": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [3, 6], [6, 1], [0, 0]]]}}}},
            json!({"a": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": "?array<?array>"}}}}),
        ),
        (
            "SerializeGeoExpressions: $box",
            doc! {"a": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}},
            json!({"a": {"$geoWithin": {"$box": "?array<?array>"}}}),
        ),
        (
            "SerializeGeoExpressions: $centerSphere",
            doc! {"a": {"$geoWithin": {"$centerSphere": [[0, 0], 0.1]}}},
            json!({"a": {"$geoWithin": {"$centerSphere": "?array<>"}}}),
        ),
        (
            "SerializeGeoExpressions: $near",
            doc! {"a": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 100}}},
            json!({"a": {"$near": {"$geometry": {"type": "Point", "coordinates": "?array<?number>"}, "$maxDistance": "?number"}}}),
        ),
        (
            "SerializeGeoExpressions: one predicate",
            doc! {"a": {"$nearSphere": [0, 0], "$minDistance": 1, "$maxDistance": 3}},
            json!({"a": {"$nearSphere": "?array<?number>", "$minDistance": "?number", "$maxDistance": "?number"}}),
        ),
        (
            "SerializeGeoExpressions: $geoIntersects",
            doc! {"a": {"$geoIntersects": {"$geometry": [0, 0]}}},
            json!({"a": {"$geoIntersects": {"$geometry": "?array<?number>"}}}),
        ),
        ("parseSampleRate", doc! {"$sampleRate": 0.5}, json!({"$expr": {"$lt": [{"$rand": {}}, "?number"]}})),
        ("parseSampleRate: constant", doc! {"$sampleRate": 1.0}, json!({"$expr": "?bool"})),
        ("parseComment", doc! {"$comment": "x", "a": 1}, json!({"a": {"$eq": "?number"}})),
        ("parseComment: alone", doc! {"$comment": "x"}, json!({})),
        (
            "And: the root's one child is unwrapped",
            doc! {"$and": [{"a": 1}, {"b": 1}]},
            json!({"$and": [{"a": {"$eq": "?number"}}, {"b": {"$eq": "?number"}}]}),
        ),
        (
            "debugTypeString: symbol is a string",
            doc! {"a": Bson::Symbol("s".into())},
            json!({"a": {"$eq": "?string"}}),
        ),
        (
            "debugTypeString: code with scope",
            doc! {"a": Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code: "f".into(), scope: doc! {} })},
            json!({"a": {"$eq": "?javascriptWithScope"}}),
        ),
        // mongotap's deliberate differences: order never splits a row.
        (
            "differs: siblings sorted (the server keeps written order)",
            doc! {"b": 1, "a": 1},
            json!({"$and": [{"a": {"$eq": "?number"}}, {"b": {"$eq": "?number"}}]}),
        ),
        (
            "differs: an explicit $and joins the implicit one",
            doc! {"$and": [{"a": 1}], "b": 1},
            json!({"$and": [{"a": {"$eq": "?number"}}, {"b": {"$eq": "?number"}}]}),
        ),
        (
            "differs: $elemMatch fields sorted",
            doc! {"a": {"$elemMatch": {"c": {"$exists": true}, "b": 5}}},
            json!({"a": {"$elemMatch": {"$and": [{"b": {"$eq": "?number"}}, {"c": {"$exists": "?bool"}}]}}}),
        ),
        (
            "differs: $jsonSchema kept whole (the server expands it)",
            doc! {"$jsonSchema": {"required": ["a"]}},
            json!({"$jsonSchema": "?object"}),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, input, want) in &cases {
        let got = shape(input.clone());
        if &got != want {
            wrong.push(format!("{name}: {input}\n  server: {want}\n  got:    {got}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases differ:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

/// A filter nested far deeper than any real query (100,000 `$or` levels, about 2 MB)
/// is shaped to a bounded depth, and the rest is one placeholder: a hostile command
/// must not exhaust the analysis thread's stack.
#[test]
fn nesting_is_bounded() {
    // Written as bytes in one pass: each level is `{$or: [<next level>]}`, 18 bytes
    // larger than the one it holds.
    let inner = RawDocumentBuf::try_from(&doc! {"a": 1}).unwrap().into_bytes();
    let levels = 100_000;
    let mut doc = Vec::with_capacity(inner.len() + 20 * levels);
    for k in (1..=levels).rev() {
        let len = (inner.len() + 18 * k) as i32;
        doc.extend_from_slice(&len.to_le_bytes());
        doc.extend_from_slice(b"\x04$or\0");
        doc.extend_from_slice(&(len - 10).to_le_bytes());
        doc.extend_from_slice(b"\x030\0");
    }
    doc.extend_from_slice(&inner);
    doc.extend(std::iter::repeat_n(0u8, 2 * levels));
    let raw = RawDocumentBuf::from_bytes(doc).unwrap();
    let shape = ShapeJson::build(|o| filter(o, &raw));
    assert!(shape.as_str().len() < 2_000, "{} bytes", shape.as_str().len());
    assert!(shape.as_str().contains("?object"));
    assert!(shape.to_value().is_object(), "and it reads back as JSON");
}
