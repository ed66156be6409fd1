//! The relationship map: collections as boxes (sized by the operations that touch
//! them), links as arrows labelled with the verdict and the read-together share.
//! As inline SVG for the HTML report (no script, readable at 1280 px and scaled
//! down on a phone) and as a Mermaid flowchart for the Markdown one (GitHub renders
//! it).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::Report;

/// Collections drawn at most (the busiest).
const MAX_NODES: usize = 16;

/// The collection part of a namespace.
fn coll(ns: &str) -> &str {
    ns.split_once('.').map_or(ns, |(_, c)| c)
}

/// The collections to draw, with how many operations touch each, and their links.
struct Graph<'r> {
    nodes: Vec<(&'r str, u64)>,
    /// (parent index, child index, verdict, read together).
    edges: Vec<(usize, usize, &'r str, f64)>,
}

fn graph(r: &Report) -> Option<Graph<'_>> {
    if r.relationships.is_empty() {
        return None;
    }
    let mut touched: BTreeMap<&str, u64> = BTreeMap::new();
    for rel in &r.relationships {
        touched.entry(&rel.parent).or_default();
        touched.entry(&rel.child).or_default();
    }
    for o in &r.operations {
        for c in &o.collections {
            if let Some(n) = touched.get_mut(c.as_str()) {
                *n += o.count;
            }
        }
    }
    let mut nodes: Vec<(&str, u64)> = touched.into_iter().collect();
    nodes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    nodes.truncate(MAX_NODES);
    let at = |ns: &str| nodes.iter().position(|(n, _)| *n == ns);
    let edges = r
        .relationships
        .iter()
        .filter_map(|rel| Some((at(&rel.parent)?, at(&rel.child)?, rel.verdict.as_str(), rel.read_together)))
        .collect();
    Some(Graph { nodes, edges })
}

/// The map as a Mermaid flowchart, in a fenced block; `None` without relationships.
pub fn mermaid(r: &Report) -> Option<String> {
    let g = graph(r)?;
    let id = |i: usize| format!("c{i}");
    let mut s = String::from("```mermaid\nflowchart LR\n");
    for (i, (ns, ops)) in g.nodes.iter().enumerate() {
        let _ = writeln!(s, "  {}[\"{} ({ops} ops)\"]", id(i), label(coll(ns)));
    }
    for (p, c, verdict, together) in &g.edges {
        let _ = writeln!(
            s,
            "  {} -->|\"{} · read together {:.0}%\"| {}",
            id(*p),
            verdict.replace('_', " "),
            together * 100.0,
            id(*c)
        );
    }
    s.push_str("```\n");
    Some(s)
}

/// What a Mermaid or SVG label may hold: no quotes, brackets or markup.
fn label(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '"' | '<' | '>' | '&' | '[' | ']' | '|' | '`')).collect()
}

/// The map as inline SVG; `None` without relationships. Parents to the left of
/// their children (columns by longest path from a root), boxes as wide as their
/// name, heights by the operations that touch them.
pub fn svg(r: &Report) -> Option<String> {
    let g = graph(r)?;
    let n = g.nodes.len();
    // Column: the longest path of links leading to the node (cycles stop at n).
    let mut col = vec![0usize; n];
    for _ in 0..n {
        let mut changed = false;
        for (p, c, _, _) in &g.edges {
            if p != c && col[*c] < col[*p] + 1 && col[*p] + 1 < n {
                col[*c] = col[*p] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let columns = col.iter().copied().max().unwrap_or(0) + 1;
    let mut row = vec![0usize; n];
    let mut per_column = vec![0usize; columns];
    for i in 0..n {
        row[i] = per_column[col[i]];
        per_column[col[i]] += 1;
    }
    let rows = per_column.iter().copied().max().unwrap_or(1);
    let max_ops = g.nodes.iter().map(|(_, o)| *o).max().unwrap_or(1).max(1) as f64;
    // Columns far enough apart for an edge's label ("extended reference 100%").
    let (cw, rh, bw) = (430.0, 96.0, 190.0);
    let (w, h) = (columns as f64 * cw + 20.0, rows as f64 * rh + 20.0);
    let bh = |ops: u64| 30.0 + 26.0 * (ops as f64 / max_ops);
    let pos = |i: usize| (20.0 + col[i] as f64 * cw, 20.0 + row[i] as f64 * rh);
    let mut s = format!(
        "<svg class=\"map\" viewBox=\"0 0 {w:.0} {h:.0}\" width=\"{w:.0}\" role=\"img\" aria-label=\"Relationship map\">\
<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#57606a\"/></marker></defs>"
    );
    for (p, c, verdict, together) in &g.edges {
        let ((px, py), (cx, cy)) = (pos(*p), pos(*c));
        let (pb, cb) = (bh(g.nodes[*p].1), bh(g.nodes[*c].1));
        let (x1, y1) = (px + bw, py + pb / 2.0);
        let (x2, y2) = if col[*c] > col[*p] { (cx, cy + cb / 2.0) } else { (cx + bw / 2.0, cy) };
        let _ = write!(
            s,
            "<line x1=\"{x1:.0}\" y1=\"{y1:.0}\" x2=\"{x2:.0}\" y2=\"{y2:.0}\" stroke=\"#57606a\" marker-end=\"url(#arrow)\"/>\
<text x=\"{:.0}\" y=\"{:.0}\" class=\"edge {cls}\" text-anchor=\"middle\">{} {:.0}%</text>",
            // Past the middle, toward the child: labels of one parent's edges fan out.
            x1 + (x2 - x1) * 0.55,
            y1 + (y2 - y1) * 0.55 - 6.0,
            label(&verdict.replace('_', " ")),
            together * 100.0,
            cls = label(verdict),
        );
    }
    for (i, (ns, ops)) in g.nodes.iter().enumerate() {
        let (x, y) = pos(i);
        let _ = write!(
            s,
            "<g class=\"node\"><rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"{bw:.0}\" height=\"{:.0}\" rx=\"6\"/>\
<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text><text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\" class=\"ops\">{ops} ops</text></g>",
            bh(*ops),
            x + bw / 2.0,
            y + 18.0,
            label(coll(ns)),
            x + bw / 2.0,
            y + 32.0,
        );
    }
    s.push_str("</svg>");
    Some(s)
}
