//! The report's `schemas` section: per collection, what its documents hold (field
//! paths, types with counts, presence, array sizes), its version field when the
//! schema versioning pattern is in use, and a validator to paste. Compass shows the
//! same from a sample of stored documents; here it comes from the documents the
//! traffic wrote and read, with who wrote each type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validator;
use super::Schemas;
use crate::detectors::Thresholds;
use crate::namespace::is_system;

/// Collections shown at most, those with the most documents first.
const MAX_SHOWN: usize = 50;

/// One collection's documents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectionSchema {
    pub namespace: String,
    /// Documents walked since the collection last started afresh (created, dropped,
    /// emptied): the figures below count these.
    pub documents_seen: u64,
    /// Of those, documents the traffic wrote (inserts and replacements).
    pub documents_written: u64,
    pub fields: Vec<FieldSchema>,
    /// Field paths past the bound (the figures are then partial).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fields_refused: u64,
    /// The schema versioning pattern's field, when its values split the field sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<VersionsSeen>,
    /// Field sets that say a migration was left half done (no version field tells
    /// the old documents from the new).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrations: Vec<MigrationSeen>,
    /// Who wrote the documents: "app (driver)".
    #[serde(default)]
    pub writers: Vec<String>,
    /// `{"$jsonSchema": ...}` inferred from the written documents (see
    /// [`validator`]), when enough were written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validator: Option<Value>,
    /// The `collMod` that applies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One field path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FieldSchema {
    /// The dotted path; array elements add no segment (`lines.sku`).
    pub path: String,
    /// `$jsonSchema` type name -> values seen.
    pub types: BTreeMap<String, u64>,
    /// Share of the documents seen that carry it.
    pub presence: f64,
    /// For arrays: lengths seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_lengths: Option<Lengths>,
    /// For a string field of a few values (an enum): how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<usize>,
    /// Those values, only with `--show-values` (and then in the validator's `enum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

impl FieldSchema {
    /// "int 36, string 2" (and an enum's values, or their number), as both
    /// reports print it.
    pub fn types_text(&self) -> String {
        let types = self.types.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", ");
        match (&self.values, self.enum_values) {
            (Some(v), _) => format!("{types}; one of {}", v.join(", ")),
            (None, Some(n)) => format!("{types}; one of {n} values (--show-values lists them)"),
            _ => types,
        }
    }

    /// "min / mean / max" for arrays, empty otherwise.
    pub fn lengths_text(&self) -> String {
        self.array_lengths.as_ref().map_or(String::new(), |l| format!("{} / {} / {}", l.min, l.mean, l.max))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lengths {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

/// A version field and its values.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VersionsSeen {
    pub field: String,
    /// Version value -> documents.
    pub values: BTreeMap<String, u64>,
    /// Per version value, the fields its documents carry that another version's do not.
    pub fields_of: BTreeMap<String, Vec<String>>,
}

/// A half-done migration: the fields only the old documents carry, and only the new.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MigrationSeen {
    pub old_fields: Vec<String>,
    pub new_fields: Vec<String>,
    /// Documents seen (written or read) of each set.
    pub old_documents: u64,
    pub new_documents: u64,
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The section, from what `schemas` learnt.
pub fn build(schemas: &Schemas, t: &Thresholds) -> Vec<CollectionSchema> {
    let mut out: Vec<CollectionSchema> = schemas
        .all()
        .filter(|(ns, c)| !is_system(ns) && c.epoch_documents > 0)
        .map(|(ns, c)| {
            let docs = c.epoch_documents as f64;
            let fields = c
                .fields
                .iter()
                .filter(|f| f.present > 0)
                .map(|f| {
                    let mut types = BTreeMap::new();
                    for ty in &f.types {
                        *types.entry(validator::alias(ty.kind).to_owned()).or_insert(0) += ty.count;
                    }
                    FieldSchema {
                        path: f.path.clone(),
                        types,
                        presence: round(f.present as f64 / docs),
                        array_lengths: f.array_lengths.map(|(min, max, sum, n)| Lengths {
                            min,
                            mean: round(sum as f64 / n.max(1) as f64),
                            max,
                        }),
                        // The version field's values are its versions, said above.
                        enum_values: validator::enum_size(f, t.validator_min_documents)
                            .filter(|_| c.versions.field != Some(f.path.as_str())),
                        values: validator::enum_values(f, t.validator_min_documents)
                            .filter(|_| c.versions.field != Some(f.path.as_str()))
                            .map(|v| v.into_iter().map(str::to_owned).collect()),
                    }
                })
                .collect();
            let versions =
                c.versions.field.filter(|_| c.versions.partitions(t.drift_min_documents)).map(|field| {
                    let v = &c.versions;
                    VersionsSeen {
                        field: field.to_owned(),
                        values: v.values.iter().map(|x| (v.key(&x.value), x.documents)).collect(),
                        fields_of: v
                            .values
                            .iter()
                            .map(|x| {
                                let own =
                                    v.own_fields(x).into_iter().map(|i| c.fields[i].path.clone()).collect();
                                (v.key(&x.value), own)
                            })
                            .collect(),
                    }
                });
            let validator = validator::infer(c, t.validator_min_documents, t.drift_min_documents);
            CollectionSchema {
                namespace: ns.clone(),
                documents_seen: c.epoch_documents,
                documents_written: c.written,
                fields,
                fields_refused: c.refused_paths,
                versions,
                migrations: c
                    .migrations(t.drift_min_documents)
                    .into_iter()
                    .map(|(m, old, new)| MigrationSeen {
                        old_fields: old.into_iter().map(str::to_owned).collect(),
                        new_fields: new.into_iter().map(str::to_owned).collect(),
                        old_documents: c.variants.variants[m.old].documents,
                        new_documents: c.variants.variants[m.new].documents,
                    })
                    .collect(),
                writers: c.writers(u16::MAX),
                fix: validator.as_ref().map(|v| validator::command(ns, v)),
                validator,
            }
        })
        .collect();
    out.sort_by(|a, b| b.documents_seen.cmp(&a.documents_seen).then_with(|| a.namespace.cmp(&b.namespace)));
    out.truncate(MAX_SHOWN);
    out
}
