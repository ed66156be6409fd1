"""A shop's search box, with an index on the searched field. Run as
`pymongo_product_search.py URI DBNAME MODE`:

- contains (R1): 30 searches find({name: {$regex: term, $options: "i"}}) with a different term each: the
  index on name cannot be sought by a case-insensitive, unanchored pattern, so every search reads every
  key. mongotap should report inefficient_regex on DB.products, field name (and no missing_index: the
  index exists).
- prefix (R2): 30 lookups by an anchored, case-sensitive SKU prefix, find({sku: {$regex: "^AB12"}}) on an
  index on sku (an index range), and 4 case-insensitive name searches (too rare to matter).
  mongotap should report nothing.
"""
import re

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("contains", "prefix"))
client, db = fresh_db(uri, dbname)
colours = ["Red", "Blue", "Green", "Black", "White", "Silver"]
kinds = ["Phone", "Tablet", "Charger", "Cable", "Case", "Speaker"]
db.products.insert_many([{"sku": f"{chr(65 + i % 5)}{chr(66 + i % 7)}{i:04d}", "name": f"{colours[i % 6]} {kinds[i % 6]} {i}",
                          "price": 5 + i % 40} for i in range(300)])
db.products.create_index("name")
db.products.create_index("sku")

found = 0
if mode == "contains":
    for i in range(30):
        term = f"{kinds[i % 6].lower()} {i}"
        found += len(list(db.products.find({"name": {"$regex": re.escape(term), "$options": "i"}}, {"name": 1})))
else:
    for i in range(30):
        prefix = f"{chr(65 + i % 5)}{chr(66 + i % 7)}00"
        found += len(list(db.products.find({"sku": {"$regex": "^" + re.escape(prefix)}}, {"sku": 1})))
    for term in ["phone", "cable", "case", "speaker"]:
        found += len(list(db.products.find({"name": {"$regex": term, "$options": "i"}}, {"name": 1})))
check(found > 0, "the searches found nothing")
print(f"{mode}: {found} products found")
