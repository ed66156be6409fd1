//! The indexes that really exist, per collection, and where that knowledge came
//! from: `listIndexes` on mongotap's own side connection (the live proxy), or what
//! the traffic shows (`listIndexes` replies, `createIndexes`, `dropIndexes`,
//! `collMod` hiding an index, `drop`). Shared between the index advisor, which
//! reads it and asks for the collections it sees, and the side connection, which
//! fills it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bson::RawDocument;
use mongotap_wire::element;
use serde_json::{json, Value};

use crate::event::Micros;

/// One field of an index key.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyPart {
    /// 1 or -1.
    Ordered(i32),
    /// `"hashed"`: equality only.
    Hashed,
    /// `"text"`, `"2d"`, `"2dsphere"`, `"geoHaystack"`: special queries only.
    Special(String),
}

impl KeyPart {
    /// A key field's value: a direction or an index type.
    pub fn from_element(e: &element::Element<'_>) -> KeyPart {
        match (e.as_str(), e.as_i64()) {
            (Some("hashed"), _) => KeyPart::Hashed,
            (Some(s), _) => KeyPart::Special(s.to_owned()),
            (None, Some(d)) if d < 0 => KeyPart::Ordered(-1),
            // A double such as -1.0 reads through as_i64; anything else ascends.
            _ => KeyPart::Ordered(1),
        }
    }

    /// As the report writes it.
    pub fn to_json(&self) -> Value {
        match self {
            KeyPart::Ordered(d) => json!(d),
            KeyPart::Hashed => json!("hashed"),
            KeyPart::Special(s) => json!(s),
        }
    }
}

/// One index, as `listIndexes` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    /// Its name.
    pub name: String,
    /// Its key, in order.
    pub key: Vec<(String, KeyPart)>,
    /// `unique: true`.
    pub unique: bool,
    /// `sparse: true`.
    pub sparse: bool,
    /// The top-level fields of its `partialFilterExpression`.
    pub partial: Option<BTreeSet<String>>,
    /// `expireAfterSeconds` (a TTL index).
    pub ttl: bool,
    /// `hidden: true`.
    pub hidden: bool,
    /// Its collation's locale, unless simple.
    pub collation: Option<String>,
}

impl IndexSpec {
    /// Reads an index description (`listIndexes` reply entry or `createIndexes` entry).
    pub fn from_document(d: &RawDocument) -> Option<IndexSpec> {
        let mut spec = IndexSpec {
            name: String::new(),
            key: Vec::new(),
            unique: false,
            sparse: false,
            partial: None,
            ttl: false,
            hidden: false,
            collation: None,
        };
        for e in element::elements(d) {
            match e.key {
                b"name" => spec.name = e.as_str()?.to_owned(),
                b"key" => spec.key = key_of(e.as_document()?),
                b"unique" => spec.unique = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"sparse" => spec.sparse = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"hidden" => spec.hidden = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"expireAfterSeconds" => spec.ttl = true,
                b"partialFilterExpression" => {
                    let mut fields = BTreeSet::new();
                    if let Some(p) = e.as_document() {
                        filter_fields(p, &mut fields);
                    }
                    spec.partial = Some(fields);
                }
                b"collation" => spec.collation = e.as_document().and_then(collation_key),
                _ => {}
            }
        }
        if spec.key.is_empty() {
            return None;
        }
        if spec.name.is_empty() {
            spec.name = default_name(&spec.key);
        }
        Some(spec)
    }

    /// The `_id` index every collection has.
    pub fn id_index() -> IndexSpec {
        IndexSpec {
            name: "_id_".into(),
            key: vec![("_id".into(), KeyPart::Ordered(1))],
            unique: true,
            sparse: false,
            partial: None,
            ttl: false,
            hidden: false,
            collation: None,
        }
    }

    /// Whether this is the `_id` index.
    pub fn is_id(&self) -> bool {
        self.name == "_id_" || (self.key.len() == 1 && self.key[0].0 == "_id")
    }

    /// The key as the report writes it: `[[field, direction], ...]`.
    pub fn key_json(&self) -> Value {
        Value::Array(self.key.iter().map(|(f, p)| json!([f, p.to_json()])).collect())
    }

    /// The key as mongosh writes it: `{a: 1, b: -1}`.
    pub fn key_js(&self) -> String {
        key_js(self.key.iter().map(|(f, p)| (f.as_str(), p.to_json())))
    }
}

/// An index key from its document (`{a: 1, b: "hashed"}`).
pub fn key_of(d: &RawDocument) -> Vec<(String, KeyPart)> {
    element::elements(d).filter_map(|k| Some((k.key_str()?.to_owned(), KeyPart::from_element(&k)))).collect()
}

/// The fields a filter names, through `$and`/`$or` (a partial index's filter).
fn filter_fields(d: &RawDocument, out: &mut BTreeSet<String>) {
    for e in element::elements(d) {
        match e.key_str() {
            Some(k) if k.starts_with('$') => {
                for branch in
                    e.as_array().into_iter().flat_map(element::elements).filter_map(|b| b.as_document())
                {
                    filter_fields(branch, out);
                }
            }
            Some(k) => {
                out.insert(k.to_owned());
            }
            None => {}
        }
    }
}

/// What decides whether string bounds match: the locale and the strength (3 by
/// default); `None` for the simple collation. listIndexes spells every option out,
/// a query names a few, so the rest is not compared.
pub fn collation_key(c: &RawDocument) -> Option<String> {
    let locale = element::find(c, "locale")?.as_str()?;
    if locale == "simple" {
        return None;
    }
    let strength = element::find(c, "strength").and_then(|s| s.as_i64()).unwrap_or(3);
    Some(format!("{locale}/{strength}"))
}

/// `{a: 1, "b.c": -1}`, quoting what is not a plain identifier.
pub fn key_js<'a>(key: impl Iterator<Item = (&'a str, Value)>) -> String {
    let parts: Vec<String> = key
        .map(|(f, d)| {
            let plain = f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
                && !f.starts_with(|c: char| c.is_ascii_digit());
            if plain {
                format!("{f}: {d}")
            } else {
                format!("{}: {d}", Value::String(f.to_owned()))
            }
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The name the server gives an index: `a_1_b_-1`.
pub fn default_name(key: &[(String, KeyPart)]) -> String {
    key.iter()
        .map(|(f, p)| format!("{f}_{}", p.to_json().to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join("_")
}

/// Where the knowledge of a collection's indexes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `listIndexes` on mongotap's own connection to the upstream.
    SideConnection,
    /// A `listIndexes` reply in the traffic.
    TrafficListIndexes,
    /// `createIndexes` commands in the traffic: these exist, there may be more.
    TrafficCreateIndexes,
}

impl Source {
    /// As the report says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::SideConnection => "listIndexes on mongotap's side connection",
            Source::TrafficListIndexes => "a listIndexes reply in the traffic",
            Source::TrafficCreateIndexes => {
                "createIndexes commands in the traffic (there may be more indexes)"
            }
        }
    }
}

/// One real request of a shape, kept (in memory only, never reported) for
/// `--explain` to run on the side connection.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The shape it belongs to.
    pub shape: u64,
    /// Its collection.
    pub namespace: String,
    /// The command, without session and transport fields, literal values and all.
    pub command: bson::Document,
    /// What it needs from an index, to skip samples an index already serves.
    pub needs: Vec<crate::detectors::indexes::esr::Need>,
}

/// What `explain` with `executionStats` said about a shape's sampled request.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// `totalKeysExamined`.
    pub keys_examined: u64,
    /// `totalDocsExamined`.
    pub docs_examined: u64,
    /// `nReturned`.
    pub returned: u64,
    /// The winning plan's stages, outermost first (`SORT <- COLLSCAN`).
    pub plan: String,
}

/// Samples waiting for `--explain`, at most.
const MAX_SAMPLES: usize = 1_000;

/// What is known of one collection's indexes.
#[derive(Debug, Clone)]
pub struct Known {
    /// The indexes.
    pub indexes: Vec<IndexSpec>,
    /// Where they were learnt.
    pub source: Source,
    /// When (event time, or the wall clock for the side connection).
    pub at: Micros,
}

/// Per collection: its indexes when known, and whether the side connection should
/// (re)read them.
#[derive(Debug, Default)]
pub struct IndexCatalog {
    known: BTreeMap<String, Known>,
    /// Collections seen in queries, with when the side connection last read them.
    wanted: BTreeMap<String, Option<Micros>>,
    /// The side connection's state, for the report: `None` when there is none.
    side: Option<String>,
    /// Collections past the bound, not followed.
    evicted: u64,
    /// `--explain`: sample requests of new shapes and explain them on the side connection.
    explain: bool,
    samples: std::collections::VecDeque<Sample>,
    sampled: std::collections::HashSet<u64>,
    explained: std::collections::HashMap<u64, Explained>,
}

/// The catalog as the advisor and the side connection share it.
pub type SharedCatalog = Arc<Mutex<IndexCatalog>>;

/// Collections followed at most (the table's shapes bound them in practice).
const MAX_COLLECTIONS: usize = 10_000;

impl IndexCatalog {
    /// An empty catalog to share.
    pub fn shared() -> SharedCatalog {
        Arc::new(Mutex::new(IndexCatalog::default()))
    }

    /// What is known of `namespace`.
    pub fn get(&self, namespace: &str) -> Option<&Known> {
        self.known.get(namespace)
    }

    /// Every collection with known indexes.
    pub fn all(&self) -> impl Iterator<Item = (&String, &Known)> {
        self.known.iter()
    }

    /// Collections past the bound.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Asks for `namespace`'s indexes (the side connection reads them soon).
    pub fn want(&mut self, namespace: &str) {
        if !self.wanted.contains_key(namespace) {
            if self.wanted.len() >= MAX_COLLECTIONS {
                self.evicted += 1;
                return;
            }
            self.wanted.insert(namespace.to_owned(), None);
        }
    }

    /// Collections due a read at `now`: never read, or read `refresh` ago or more.
    pub fn due(&self, now: Micros, refresh: Micros) -> Vec<String> {
        self.wanted
            .iter()
            .filter(|(_, at)| at.is_none_or(|at| now.saturating_sub(at) >= refresh))
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// The side connection read `namespace`'s indexes at `at`.
    pub fn install(&mut self, namespace: &str, indexes: Vec<IndexSpec>, source: Source, at: Micros) {
        if source == Source::SideConnection {
            self.wanted.insert(namespace.to_owned(), Some(at));
        }
        self.known.insert(namespace.to_owned(), Known { indexes, source, at });
    }

    /// The side connection asked for `namespace`'s indexes at `at` and was refused (a
    /// view, no privilege): it asks again at the next refresh; what is known stays.
    pub fn read_without_answer(&mut self, namespace: &str, at: Micros) {
        if let Some(w) = self.wanted.get_mut(namespace) {
            *w = Some(at);
        }
    }

    /// Records the side connection's state for the report ("connected", or why not).
    pub fn set_side(&mut self, state: impl Into<String>) {
        self.side = Some(state.into());
    }

    /// The side connection's state, if there is one.
    pub fn side(&self) -> Option<&str> {
        self.side.as_deref()
    }

    /// A `createIndexes` succeeded: these indexes exist now.
    pub fn created(&mut self, namespace: &str, specs: Vec<IndexSpec>, at: Micros) {
        let k = self.known.entry(namespace.to_owned()).or_insert_with(|| Known {
            indexes: vec![IndexSpec::id_index()],
            source: Source::TrafficCreateIndexes,
            at,
        });
        for s in specs {
            k.indexes.retain(|i| i.name != s.name);
            k.indexes.push(s);
        }
        self.refresh_soon(namespace);
    }

    /// A `dropIndexes` succeeded: `names` ("*" for all but `_id`), or indexes by key.
    pub fn dropped(&mut self, namespace: &str, names: &[String], keys: &[Vec<(String, KeyPart)>]) {
        if let Some(k) = self.known.get_mut(namespace) {
            let all = names.iter().any(|n| n == "*");
            k.indexes.retain(|i| i.is_id() || !(all || names.contains(&i.name) || keys.contains(&i.key)));
        }
        self.refresh_soon(namespace);
    }

    /// `collMod` hid or unhid an index.
    pub fn hidden(
        &mut self,
        namespace: &str,
        name: Option<&str>,
        key: Option<&[(String, KeyPart)]>,
        hidden: bool,
    ) {
        if let Some(k) = self.known.get_mut(namespace) {
            for i in &mut k.indexes {
                if Some(i.name.as_str()) == name || Some(i.key.as_slice()) == key {
                    i.hidden = hidden;
                }
            }
        }
        self.refresh_soon(namespace);
    }

    /// The collection (or, with `None`, every collection of `db`) was dropped.
    pub fn forget(&mut self, db: &str, collection: Option<&str>) {
        let hit = |ns: &String| match collection {
            Some(c) => ns.split_once('.') == Some((db, c)),
            None => ns.split_once('.').is_some_and(|(d, _)| d == db),
        };
        self.known.retain(|ns, _| !hit(ns));
        self.wanted.retain(|ns, _| !hit(ns));
    }

    /// Turns `--explain` on: the advisor samples one request per new shape.
    pub fn enable_explain(&mut self) {
        self.explain = true;
    }

    /// Whether the advisor should keep a sample of `shape`.
    pub fn wants_sample(&self, shape: u64) -> bool {
        self.explain && self.samples.len() < MAX_SAMPLES && !self.sampled.contains(&shape)
    }

    /// Keeps a sample for the side connection.
    pub fn add_sample(&mut self, sample: Sample) {
        if self.sampled.insert(sample.shape) {
            self.samples.push_back(sample);
        }
    }

    /// The oldest sample waiting for `--explain` (see [`super::fit::next_unserved_sample`]).
    pub fn pop_sample(&mut self) -> Option<Sample> {
        self.samples.pop_front()
    }

    /// Records what explain said about a shape.
    pub fn set_explained(&mut self, shape: u64, e: Explained) {
        self.explained.insert(shape, e);
    }

    /// What explain said about a shape, if it ran.
    pub fn explained(&self, shape: u64) -> Option<&Explained> {
        self.explained.get(&shape)
    }

    /// After a change that passed through, the side connection reads it again at once.
    fn refresh_soon(&mut self, namespace: &str) {
        if let Some(at) = self.wanted.get_mut(namespace) {
            *at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn reads_index_descriptions() {
        let d = rawdoc! {"v": 2, "key": {"a": 1, "b": -1.0, "h": "hashed"}, "name": "a_1",
        "unique": true, "partialFilterExpression": {"status": "open"}, "collation": {"locale": "fr"}};
        let s = IndexSpec::from_document(&d).unwrap();
        assert_eq!(
            s.key,
            vec![
                ("a".into(), KeyPart::Ordered(1)),
                ("b".into(), KeyPart::Ordered(-1)),
                ("h".into(), KeyPart::Hashed)
            ]
        );
        assert!(s.unique && !s.sparse && !s.ttl);
        assert_eq!(s.partial, Some(BTreeSet::from(["status".to_owned()])));
        assert_eq!(s.collation.as_deref(), Some("fr/3"));
        let p = rawdoc! {"key": {"a": 1}, "partialFilterExpression": {"$and": [{"a": {"$exists": true}}, {"b": {"$gt": 5}}]}};
        assert_eq!(
            IndexSpec::from_document(&p).unwrap().partial,
            Some(BTreeSet::from(["a".to_owned(), "b".to_owned()]))
        );
        assert_eq!(s.key_js(), "{a: 1, b: -1, h: \"hashed\"}");
        let unnamed = IndexSpec::from_document(&rawdoc! {"key": {"customerId": 1, "createdAt": -1}}).unwrap();
        assert_eq!(unnamed.name, "customerId_1_createdAt_-1");
        assert!(IndexSpec::from_document(&rawdoc! {"name": "x"}).is_none());
    }

    #[test]
    fn traffic_changes_the_catalog_and_asks_for_a_refresh() {
        let mut c = IndexCatalog::default();
        c.want("shop.orders");
        assert_eq!(c.due(0, 60), vec!["shop.orders"]);
        c.install("shop.orders", vec![IndexSpec::id_index()], Source::SideConnection, 100);
        assert!(c.due(120, 60).is_empty());
        let spec = IndexSpec::from_document(&rawdoc! {"key": {"a": 1}, "name": "a_1"}).unwrap();
        c.created("shop.orders", vec![spec.clone()], 130);
        assert_eq!(c.due(131, 60), vec!["shop.orders"], "read again at once after createIndexes");
        assert_eq!(c.get("shop.orders").unwrap().indexes.len(), 2);
        c.hidden("shop.orders", Some("a_1"), None, true);
        assert!(c.get("shop.orders").unwrap().indexes[1].hidden);
        c.dropped("shop.orders", &["*".into()], &[]);
        assert_eq!(c.get("shop.orders").unwrap().indexes.len(), 1, "_id stays");
        c.forget("shop", None);
        assert!(c.get("shop.orders").is_none());
        // createIndexes on an unknown collection: partial knowledge, _id implied.
        c.created("shop.items", vec![spec], 1);
        let k = c.get("shop.items").unwrap();
        assert_eq!((k.indexes.len(), k.source), (2, Source::TrafficCreateIndexes));
    }
}
