"""O1, O2: a product page over products that embed all their reviews (200 each, about 30 KB a document).
Run as `pymongo_product_page.py URI DBNAME MODE`:

- whole (O1): the page reads each product whole, find_one({_id}), 40 page views: every view pulls the
  entire reviews array for a page that shows a name, a price and a few reviews. mongotap should report
  over_fetch on DB.products, field reviews.
- projected (O2): the same page with a projection that keeps the latest 5 reviews ({reviews: {$slice: -5}}).
  mongotap should report nothing.
"""
from common import args, check, fresh_db

uri, dbname, mode = args(modes=("whole", "projected"))
client, db = fresh_db(uri, dbname)
review = {"author": "someone", "stars": 4, "text": "Works as described, would buy again. " * 3}
ids = db.products.insert_many(
    [{"name": f"Lamp {p}", "price": 20 + p, "reviews": [review] * 200} for p in range(8)]).inserted_ids
projection = None if mode == "whole" else {"reviews": {"$slice": -5}}
for view in range(40):
    product = db.products.find_one({"_id": ids[view % len(ids)]}, projection)
    check(product is not None and product["name"].startswith("Lamp"), "product missing")
    check(len(product["reviews"]) == (200 if mode == "whole" else 5), "unexpected reviews")
print(f"{mode}: 40 product page views")
