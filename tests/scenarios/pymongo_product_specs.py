"""A catalogue whose products carry specs that depend on their category. Run as
`pymongo_product_specs.py URI DBNAME MODE`:

- specs (A1): 120 products in 6 categories, each category with its own two specs under `specs`
  (a lamp's wattage and color temperature, a drive's capacity and interface...); the shop filters on six of
  them, and each has its own index, as the attribute pattern's "before" has. Each spec is in a sixth of the
  documents. mongotap should report attribute_candidate on DB.products, field specs, naming the six
  indexes the one {specs.k, specs.v} index replaces.
- address (A2): customers with an address whose five fields every document has, each filtered on its own
  with its own index. Not attributes: no finding.
"""
from common import args, check, fresh_db

uri, dbname, mode = args(modes=("specs", "address"))
client, db = fresh_db(uri, dbname)

SPECS = {
    "lamp": ("watts", "kelvin"), "drive": ("capacity", "interface"), "shirt": ("size", "fabric"),
    "phone": ("screen", "storage"), "chair": ("height", "material"), "bike": ("frame", "gears"),
}
found = 0
if mode == "specs":
    db.products.insert_many([
        {"_id": i, "name": f"Product {i}", "category": cat, "price": 10 + i,
         "specs": {SPECS[cat][0]: f"{SPECS[cat][0]}-{i % 4}", SPECS[cat][1]: f"{SPECS[cat][1]}-{i % 3}"}}
        for i, cat in ((i, list(SPECS)[i % 6]) for i in range(120))
    ])
    asked = ["watts", "capacity", "size", "screen", "height", "frame"]
    for spec in asked:
        db.products.create_index(f"specs.{spec}")
    for round_ in range(8):
        for spec in asked:
            found += len(list(db.products.find({f"specs.{spec}": f"{spec}-{round_ % 4}"}, {"name": 1})))
    check(found > 0, "the filters find products")
else:
    db.customers.insert_many([
        {"_id": i, "name": f"Customer {i}",
         "address": {"street": f"{i} Main St", "city": f"City {i % 9}", "zip": f"{10000 + i % 50}",
                     "state": f"S{i % 5}", "country": "FR"}}
        for i in range(120)
    ])
    fields = ["street", "city", "zip", "state", "country"]
    for f in fields:
        db.customers.create_index(f"address.{f}")
    for round_ in range(8):
        found += len(list(db.customers.find({"address.city": f"City {round_}"}, {"name": 1})))
        found += len(list(db.customers.find({"address.zip": f"{10000 + round_}"}, {"name": 1})))
        found += len(list(db.customers.find({"address.state": f"S{round_ % 5}"}, {"name": 1})))
        found += len(list(db.customers.find({"address.country": "FR"}, {"name": 1}).limit(5)))
        found += len(list(db.customers.find({"address.street": f"{round_} Main St"}, {"name": 1})))
    check(found > 0, "the filters find customers")
print(f"{mode}: {found} documents found")
