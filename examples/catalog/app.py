"""A catalogue whose products carry specs that depend on their category.

120 products in 6 categories, each category with its own two specs (a lamp's
wattage and colour temperature, a drive's capacity and interface...); the shop
filters on six of them.

bad:   the specs as fields under `specs` (specs.watts, specs.capacity...), each
       filtered on with an index of its own: six indexes, and one more for every
       new spec.
fixed: the attribute pattern: specs as an array of {k, v} pairs, one
       {"specs.k": 1, "specs.v": 1} index serving every filter
       (find({specs: {$elemMatch: {k: "watts", v: "watts-1"}}})).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("catalog")
SPECS = {
    "lamp": ("watts", "kelvin"), "drive": ("capacity", "interface"), "shirt": ("size", "fabric"),
    "phone": ("screen", "storage"), "chair": ("height", "material"), "bike": ("frame", "gears"),
}
products = []
for i in range(120):
    cat = list(SPECS)[i % 6]
    specs = {SPECS[cat][0]: f"{SPECS[cat][0]}-{i % 4}", SPECS[cat][1]: f"{SPECS[cat][1]}-{i % 3}"}
    if version == "fixed":
        specs = [{"k": k, "v": v} for k, v in specs.items()]
    products.append({"_id": i, "name": f"Product {i}", "category": cat, "price": 10 + i, "specs": specs})
db.products.insert_many(products)
asked = ["watts", "capacity", "size", "screen", "height", "frame"]
if version == "bad":
    for spec in asked:
        db.products.create_index(f"specs.{spec}")
else:
    db.products.create_index([("specs.k", 1), ("specs.v", 1)])
found = 0
for round_ in range(8):
    for spec in asked:
        value = f"{spec}-{round_ % 4}"
        query = ({f"specs.{spec}": value} if version == "bad"
                 else {"specs": {"$elemMatch": {"k": spec, "v": value}}})
        found += len(list(db.products.find(query, {"name": 1})))
check(found > 0, "the filters find products")
print(f"{version}: {found} products found by 48 filters")
