"""The demo's before/after table: `summary.py BEFORE.json AFTER.json`.

Each example runs in its own database (named after it), so a finding belongs to the
example whose database its namespace is in, and an operation to the example whose
app name (`NAME-bad` / `NAME-fixed`) sent it.
"""
import json
import sys

EXAMPLES = ["order_page", "blog", "reviews", "order_updates", "sensors", "order_history", "display_name", "contacts",
            "totals", "page_views", "sessions", "search", "books", "catalog"]


def per_example(report, version):
    out = {}
    for name in EXAMPLES:
        rows = [r for r in report["access_patterns"] if f"{name}-{version}" in r["apps"]]
        findings = [f["kind"] for f in report["findings"] if f["namespace"].split(".")[0] == name]
        out[name] = {
            "reads": sum(r["count"] for r in rows if r["category"] == "read"),
            "writes": sum(r["count"] for r in rows if r["category"] == "write"),
            "read": sum(r["reply_bytes"]["total"] for r in rows if r["category"] == "read"),
            "written": sum(r["request_bytes"]["total"] for r in rows if r["category"] == "write"),
            "findings": sorted(set(findings)),
        }
    return out


def size(n):
    return f"{n / 1024:.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def main():
    before, after = (per_example(json.load(open(p)), v) for p, v in zip(sys.argv[1:3], ("bad", "fixed")))
    print(f"{'example':<14}{'reads':>14}{'writes':>14}{'bytes read':>20}{'bytes written':>20}   findings (bad -> fixed)")
    for name in EXAMPLES:
        b, a = before[name], after[name]
        cells = [f"{b['reads']:>5} -> {a['reads']:<5}", f"{b['writes']:>5} -> {a['writes']:<5}",
                 f"{size(b['read']):>7} -> {size(a['read']):<7}", f"{size(b['written']):>7} -> {size(a['written']):<7}"]
        found = f"{', '.join(b['findings']) or 'none'} -> {', '.join(a['findings']) or 'none'}"
        print(f"{name:<14}{cells[0]:>14}{cells[1]:>14}{cells[2]:>20}{cells[3]:>20}   {found}")
    fb, fa = (sum(len(x[name]["findings"]) for name in EXAMPLES) for x in (before, after))
    rb, ra = (sum(x[name]["reads"] for name in EXAMPLES) for x in (before, after))
    bb, ba = (sum(x[name]["read"] for name in EXAMPLES) for x in (before, after))
    print(f"findings: {fb} with the bad versions, {fa} with the fixed ones; reads: {rb - ra} fewer round trips, "
          f"{size(bb - ba)} less read.")
    print("(Writes include the seeding; the subset and bucket patterns trade a second or larger write for small reads.)")


if __name__ == "__main__":
    main()
