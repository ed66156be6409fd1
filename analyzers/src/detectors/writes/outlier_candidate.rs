//! `outlier_candidate`: an array that is small in almost every document and huge
//! in a few (a book's buyers, a user's followers: most have dozens, a best seller
//! or a celebrity has a hundred thousand). Moving the whole array out to its own
//! collection would make every document pay for the few; the outlier pattern
//! (MongoDB's pattern catalogue) keeps the array embedded and moves only the
//! overflow of the few into overflow documents, with a flag on the parent.
//!
//! The lengths come from the schemas (every array of the documents walked, written
//! or read whole; see [`crate::schema`]), kept per field in doubling buckets. It is
//! a finding when a field had at least `outlier_min_arrays` arrays, the typical one
//! (p50) is at most `outlier_max_typical` long, and a few, at most
//! `outlier_max_share` of them, reach `outlier_min_length` and ten times the
//! typical length.

use serde_json::json;

use crate::detectors::{collection, Context, Detector};
use crate::finding::{Draft, Finding, Severity};
use crate::namespace::is_system;

/// The detector: it keeps nothing; the schemas hold the arrays' lengths.
pub struct OutlierCandidate;

impl Detector for OutlierCandidate {
    fn name(&self) -> &'static str {
        "outlier_candidate"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        for (ns, c) in ctx.schemas.all() {
            if is_system(ns) {
                continue;
            }
            for f in &c.fields {
                let Some(h) = &f.lengths else { continue };
                let arrays = h.arrays();
                if arrays < t.outlier_min_arrays {
                    continue;
                }
                let p50 = h.quantile(0.5);
                if p50 > t.outlier_max_typical {
                    continue;
                }
                let (limit, above) = h.at_least(t.outlier_min_length.max(p50.saturating_mul(10)));
                let share = above as f64 / arrays as f64;
                if above == 0 || share > t.outlier_max_share {
                    continue;
                }
                let max = f.array_lengths.map_or(0, |(_, max, _, _)| max);
                let overflow = (p50.max(1) * 4).next_power_of_two().max(t.outlier_max_typical);
                let path = &f.path;
                let coll = collection(ns);
                let recommendation = format!(
                    "`{path}` of {ns} is an array of at most {p50} elements in half of the {arrays} documents seen, but {above} of them ({pct:.1}%) hold {limit} or more (up to {max}). Keep it embedded for the many and move only the overflow of the few to overflow documents, with a flag on the parent (the outlier pattern), instead of moving the whole array to its own collection.",
                    pct = share * 100.0,
                );
                let fix = format!(
                    "// keep the first {overflow} elements in the document; past that, flag it and write the rest apart:\ndb.{coll}.updateOne({{ _id: id, \"{path}.{overflow}\": {{ $exists: false }} }}, {{ $push: {{ \"{path}\": item }} }})\n// when that matched nothing, the array is full: mark the outlier and write to its overflow\ndb.{coll}.updateOne({{ _id: id }}, {{ $set: {{ has_overflow: true }} }})\ndb.{coll}_overflow.updateOne({{ parent: id, count: {{ $lt: {overflow} }} }}, {{ $push: {{ \"{path}\": item }}, $inc: {{ count: 1 }} }}, {{ upsert: true }})\n// readers fetch the overflow only for documents with has_overflow: true"
                );
                out.push(
                    Draft {
                        kind: "outlier_candidate",
                        severity: Severity::Low,
                        namespace: ns,
                        shapes: &[],
                        evidence: json!({
                            "count": above,
                            "arrays_seen": arrays,
                            "length": {"p50_at_most": p50, "p99_at_most": h.quantile(0.99), "max": max},
                            "outlier_length": limit,
                            "outlier_share": (share * 1000.0).round() / 1000.0,
                            "buckets": h.buckets(),
                            "thresholds": {
                                "outlier_min_arrays": t.outlier_min_arrays,
                                "outlier_max_typical": t.outlier_max_typical,
                                "outlier_min_length": t.outlier_min_length,
                                "outlier_max_share": t.outlier_max_share,
                            },
                        }),
                        recommendation,
                        fix: Some(fix),
                        extra: vec![("field", json!(path))],
                    }
                    .finding(),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use crate::script::Script;

    fn outliers(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "outlier_candidate").collect()
    }

    fn book(s: &mut Script, c: u64, i: i32, buyers: usize) {
        let buyers: Vec<i32> = (0..buyers as i32).collect();
        s.exchange(
            c,
            doc! {"insert": "books", "documents": [{"_id": i, "title": "t", "buyers": buyers}], "$db": "shop"},
            doc! {"n": 1, "ok": 1.0},
        );
    }

    #[test]
    fn a_few_best_sellers_among_many_small_books_are_outliers() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..100 {
            book(&mut s, c, i, (i % 20) as usize);
        }
        for i in 100..103 {
            book(&mut s, c, i, 2_500);
        }
        let f = outliers(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.extra["field"], "buyers");
        assert_eq!(f.evidence["count"], 3);
        assert_eq!(f.evidence["length"]["max"], 2_500);
        assert_eq!(f.evidence["length"]["p50_at_most"], 15);
        assert!(f.fix.as_deref().unwrap().contains("books_overflow"), "{:?}", f.fix);
    }

    #[test]
    fn even_sizes_and_many_large_ones_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..100 {
            book(&mut s, c, i, 10 + (i % 30) as usize);
        }
        assert!(outliers(s).is_empty(), "even sizes");
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..100 {
            book(&mut s, c, i, if i % 5 == 0 { 1_500 } else { 5 });
        }
        assert!(outliers(s).is_empty(), "one in five is no outlier: the large case is normal");
    }
}
