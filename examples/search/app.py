"""A search box over product names, as the user types.

300 products, an index on their name; 30 searches by the start of a name,
whatever its case ("red ph" finds "Red Phone 6").

bad:   find({name: {$regex: "^red ph", $options: "i"}}): a case-insensitive
       pattern cannot seek the index on name, so every search reads every key.
fixed: the name stored lower-cased beside it (name_lower, with its index) and an
       anchored, case-sensitive prefix on it (find({name_lower: {$regex: "^red ph"}})):
       an index range.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("search")
colours = ["Red", "Blue", "Green", "Black", "White", "Silver"]
kinds = ["Phone", "Tablet", "Charger", "Cable", "Case", "Speaker"]
products = [{"name": f"{colours[i % 6]} {kinds[(i // 6) % 6]} {i}", "price": 5 + i % 40} for i in range(300)]
if version == "bad":
    db.products.create_index("name")
else:
    for p in products:
        p["name_lower"] = p["name"].lower()
    db.products.create_index("name_lower")
db.products.insert_many(products)
found = 0
for i in range(30):
    typed = f"{colours[i % 6]} {kinds[(i // 6) % 6][:2]}".lower()
    if version == "bad":
        query = {"name": {"$regex": "^" + re.escape(typed), "$options": "i"}}
    else:
        query = {"name_lower": {"$regex": "^" + re.escape(typed)}}
    found += len(list(db.products.find(query, {"name": 1}).limit(10)))
check(found > 0, "the searches found nothing")
print(f"{version}: {found} products found by 30 searches")
