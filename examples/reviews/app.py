"""Product reviews pushed forever.

Product reviews: one product goes viral and gets 400 reviews, five others a few each,
and its page is viewed after every 10 reviews.

bad:   every review is $push'ed into the product document, forever: the viral product's
       reviews array (and the document every product page loads) grows without bound.
fixed: the subset pattern: each review is inserted into a reviews collection, and the
       product keeps only the 10 latest for its page ($push with $each and $slice: -10).
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("reviews")
ids = db.products.insert_many([{"name": f"Product {p}", "price": 10 + p, "reviews": []} for p in range(6)]).inserted_ids
viral, others = ids[0], ids[1:]
for n in range(415):  # every 27th review goes to one of the others, the rest to the viral product
    product = others[(n // 27) % 5] if n % 27 == 26 else viral
    review = {"author": f"user{n % 97}", "stars": 1 + n % 5, "text": "Works as described. " * 3,
              "at": datetime.datetime(2024, 5, 1) + datetime.timedelta(minutes=n)}
    if version == "bad":
        db.products.update_one({"_id": product}, {"$push": {"reviews": review}})
    else:
        db.reviews.insert_one({"productId": product, **review})
        db.products.update_one({"_id": product}, {"$push": {"reviews": {"$each": [review], "$slice": -10}}})
    if n % 10 == 9:  # the product page: the product and the reviews it shows
        check(db.products.find_one({"_id": viral}) is not None, "the viral product is gone")
sizes = sorted(len(p["reviews"]) for p in db.products.find({}, {"reviews": 1}))
check(sizes[-1] == (400 if version == "bad" else 10), f"review arrays {sizes}")
print(f"{version}: 415 reviews; the viral product's array holds {sizes[-1]}")
