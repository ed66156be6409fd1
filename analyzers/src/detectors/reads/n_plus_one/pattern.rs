//! Patterns: what closed occurrences add up to, per parent shape, child shape and
//! link; and the findings they make.

use super::*;

/// A pattern: parent shape, child shape and the link between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct PatternKey {
    pub(super) parent: ShapeId,
    pub(super) child: ShapeId,
    pub(super) path: u32,
    pub(super) field: u32,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Pattern {
    pub(super) occurrences: u64,
    pub(super) children: u64,
    pub(super) distinct: u64,
    pub(super) samples: Vec<u64>,
    pub(super) max_n: u64,
    pub(super) latency_us: u64,
    pub(super) min_coverage: f64,
    pub(super) min_explained: f64,
    pub(super) first_at: Micros,
    pub(super) last_at: Micros,
    pub(super) apps: BTreeSet<String>,
    pub(super) drivers: BTreeSet<String>,
}

/// Patterns with the same parent namespace, child and link: one finding.
#[derive(Default)]
pub(super) struct Group {
    /// (operations, shape) of each parent shape.
    pub(super) parents: Vec<(u64, ShapeId)>,
    pub(super) pattern: Pattern,
    pub(super) parent_reads: u64,
    pub(super) examined: u64,
}

/// Adds one pattern's figures to another's.
pub(super) fn absorb(into: &mut Pattern, p: &Pattern) {
    if into.occurrences == 0 {
        *into = p.clone();
        return;
    }
    into.occurrences += p.occurrences;
    into.children += p.children;
    into.distinct += p.distinct;
    into.samples.extend(p.samples.iter().take(MAX_SAMPLES.saturating_sub(into.samples.len())));
    into.max_n = into.max_n.max(p.max_n);
    into.latency_us += p.latency_us;
    into.min_coverage = into.min_coverage.min(p.min_coverage);
    into.min_explained = into.min_explained.min(p.min_explained);
    into.first_at = into.first_at.min(p.first_at);
    into.last_at = into.last_at.max(p.last_at);
    into.apps.extend(p.apps.iter().cloned());
    into.drivers.extend(p.drivers.iter().cloned());
}

pub(super) fn merge(p: &mut Pattern, c: &Contribution, conn: &ConnInfo) {
    if p.occurrences == 0 {
        p.first_at = c.at;
        p.min_coverage = c.coverage;
        p.min_explained = c.explained;
    }
    if p.samples.len() < MAX_SAMPLES {
        p.samples.push(c.children);
    } else {
        p.samples[(p.occurrences as usize) % MAX_SAMPLES] = c.children;
    }
    p.occurrences += 1;
    p.children += c.children;
    p.distinct += c.distinct;
    p.max_n = p.max_n.max(c.children);
    p.latency_us += c.latency_us;
    p.min_coverage = p.min_coverage.min(c.coverage);
    p.min_explained = p.min_explained.min(c.explained);
    p.first_at = p.first_at.min(c.at);
    p.last_at = p.last_at.max(c.at);
    let app = conn.app_name.as_deref().unwrap_or(NO_APP);
    crate::detectors::keep_name(&mut p.apps, app);
    if let Some(d) = &conn.driver {
        crate::detectors::keep_name(&mut p.drivers, d);
    }
}

/// The detector's findings: patterns grouped by parent namespace, child and link.
pub(super) fn findings(d: &NPlusOne, ctx: &Context<'_>) -> Vec<Finding> {
    let t = ctx.thresholds;
    // One problem, one finding: parent shapes that differ only in options (a first
    // page without `skip`, later pages with it) but link to the same child through
    // the same field are one N+1 (Sentry split one problem into many fingerprints,
    // getsentry/sentry#40650).
    let mut groups: BTreeMap<(String, String, ShapeId, u32, u32), Group> = BTreeMap::new();
    let mut patterns: Vec<(PatternKey, Pattern)> = d.patterns_now().into_iter().collect();
    patterns.sort_by_key(|(k, _)| *k);
    for (k, p) in patterns {
        let Some(parent) = ctx.row(k.parent) else { continue };
        let key = (parent.namespace.clone(), parent.command.clone(), k.child, k.path, k.field);
        let shape = d.parents.get(&k.parent).cloned().unwrap_or_default();
        let g = groups.entry(key).or_default();
        g.parents.push((parent.count, k.parent));
        absorb(&mut g.pattern, &p);
        g.parent_reads += shape.reads.max(p.occurrences);
        g.examined += shape.indexed.max(p.occurrences);
    }
    let mut out = Vec::new();
    for ((_, _, child, path, field), Group { mut parents, pattern: p, parent_reads, examined }) in groups {
        parents.sort_by(|a, b| b.cmp(a));
        let k = PatternKey { parent: parents[0].1, child, path, field };
        // A loop that loads children one at a time does so on every render of its
        // page; reads of the same ids from the client's other threads line up with a
        // page only now and then.
        if (p.occurrences as f64) < t.n_plus_one_min_recurrence * examined as f64 {
            continue;
        }
        let (Some(parent), Some(child)) = (ctx.row(k.parent), ctx.row(k.child)) else { continue };
        let mut shapes: Vec<ShapeId> = parents.iter().map(|(_, id)| *id).collect();
        shapes.push(k.child);
        let (path, field) = (d.paths.name(k.path), d.names.name(k.field));
        let typical = median(&p.samples);
        let extra = p.children.saturating_sub(p.occurrences);
        let cost_per_parent = typical.saturating_sub(1) as f64 * t.assumed_rtt_ms;
        let severity =
            if typical >= t.n_plus_one_high_children || cost_per_parent >= t.n_plus_one_high_cost_ms {
                Severity::High
            } else {
                Severity::Medium
            };
        let fields: Vec<String> = child.fields_read.iter().cloned().collect();
        // The fix projects only what the children asked for themselves; fields seen
        // in their replies are a guess, and a projection built on a guess would
        // drop fields the application uses.
        let projected: Vec<String> =
            if child.shape.get("projection").is_some() { fields.clone() } else { Vec::new() };
        let stack = Stack::from_driver(p.drivers.iter().next().map(String::as_str));
        // Children asking with a one-value $in batch per group (a class, a key).
        let grouped = child.shape.to_string().contains("\"$in\"");
        let batch = Batch {
            parent: collection(&parent.namespace),
            child: collection(&child.namespace),
            path,
            array: d.paths.array(k.path),
            field,
            fields: &projected,
            grouped,
        };
        let stacks: Vec<String> = p.drivers.iter().map(|d| Stack::describe(d)).collect();
        let odm_hint = match stack.odm {
            _ if crate::namespace::is_gridfs(&child.namespace) => "",
            Some(crate::detectors::driver::Odm::MongoEngine) if grouped => {
                " MongoEngine loads a GenericReferenceField with one $in per referenced class: select_related() is no fix when each class holds one reference; a ReferenceField to the base class loads them with one $in."
            }
            _ if grouped => {
                " The children already ask with $in, one group at a time, and each group held one reference: collect the ids of every group first."
            }
            Some(crate::detectors::driver::Odm::MongoEngine) => {
                " With MongoEngine, select_related() on the queryset loads the references with one $in per collection."
            }
            Some(crate::detectors::driver::Odm::Mongoose) => {
                " With Mongoose, populate() without perDocumentLimit loads a path with one $in."
            }
            _ => "",
        };
        let read = if fields.iter().any(|f| f != "_id") {
            format!(" ({})", fields.iter().filter(|f| *f != "_id").cloned().collect::<Vec<_>>().join(", "))
        } else {
            String::new()
        };
        // GridFS: each file is read through its files and chunks collections.
        let gridfs = crate::namespace::is_gridfs(&child.namespace);
        let mut recommendation = format!(
            "Each {pc} on {pns} that returns several documents is followed by one {cc} on {cns} per document, \
             matching {cf} to the parent's {pf} (typical N = {typical}, in {occ} of {reads} such reads; \
             {extra} extra round trips, about {cost:.0} ms per page at {rtt} ms a round trip). Fetch them \
             with one $in query per page.{odm_hint} If the page always needs them, embed the fields it reads{read} \
             in {pcoll} as an extended reference.",
            pc = parent.command,
            pns = parent.namespace,
            cc = child.command,
            cns = child.namespace,
            cf = field,
            pf = path,
            occ = p.occurrences,
            reads = examined,
            cost = cost_per_parent,
            rtt = t.assumed_rtt_ms,
            pcoll = collection(&parent.namespace),
        );
        if gridfs {
            recommendation = format!(
                "Each {} on {} that returns several documents is followed by a GridFS read per document on {} \
                 (typical N = {typical}, in {} of {examined} such reads): every file costs its own round trips to \
                 fs.files and fs.chunks, and no ODM batches them. Files under 16 MB fit in the document itself \
                 (binary data: one read with the rest); otherwise read a file's content only where the page shows it.",
                parent.command, parent.namespace, child.namespace, p.occurrences
            );
        }
        let evidence = json!({
            "count": p.children,
            "parent": {
                "shape_id": parent.shape_id, "command": parent.command, "shape": parent.shape,
                "count": parents.iter().map(|(n, _)| n).sum::<u64>(), "multi_document_reads": parent_reads,
                "examined_reads": examined,
                "other_shape_ids": shapes[1..shapes.len() - 1].iter().map(|s| crate::shape::hex(*s)).collect::<Vec<_>>(),
            },
            "child": {
                "shape_id": child.shape_id, "command": child.command, "shape": child.shape,
                "count": child.count, "p50_ms": child.latency_ms(0.5), "p99_ms": child.latency_ms(0.99),
                "fields_read": fields,
            },
            "occurrences": p.occurrences,
            "occurrence_share": (p.occurrences as f64 / examined as f64 * 1000.0).round() / 1000.0,
            "typical_n": typical,
            "max_n": p.max_n,
            "distinct_values_per_parent": (p.distinct as f64 / p.occurrences as f64 * 10.0).round() / 10.0,
            "extra_round_trips": extra,
            "observed_child_time_ms": ms(p.latency_us as f64),
            "estimated_cost_ms_per_parent": cost_per_parent,
            "estimated_cost_ms_total": extra as f64 * t.assumed_rtt_ms,
            "assumed_rtt_ms": t.assumed_rtt_ms,
            "min_coverage": (p.min_coverage * 1000.0).round() / 1000.0,
            "min_explained": (p.min_explained * 1000.0).round() / 1000.0,
            "apps": p.apps,
            "drivers": stacks,
            "first_seen": crate::event::rfc3339(p.first_at),
            "last_seen": crate::event::rfc3339(p.last_at),
            "thresholds": {
                "n_plus_one_min_children": t.n_plus_one_min_children,
                "n_plus_one_min_coverage": t.n_plus_one_min_coverage,
                "n_plus_one_min_explained": t.n_plus_one_min_explained,
                "n_plus_one_min_recurrence": t.n_plus_one_min_recurrence,
                "n_plus_one_max_per_reference": t.n_plus_one_max_per_reference,
            },
        });
        out.push(
            Draft {
                kind: "n_plus_one",
                severity,
                namespace: &parent.namespace,
                shapes: &shapes,
                evidence,
                recommendation,
                fix: Some(if gridfs {
                    snippets::gridfs(&batch)
                } else {
                    snippets::batch_fetch(stack, &batch)
                }),
                extra: vec![
                    ("child_namespace", json!(child.namespace)),
                    ("link", json!({"parent_field": path, "child_field": field})),
                ],
            }
            .finding(),
        );
    }
    out
}
