"""W3, X2: product reviews kept in the product document. One product goes viral and gets 400 reviews,
5 others get 3 each, the 15 spread among the 400. Run as `pymongo_reviews.py URI DBNAME MODE`:

- push (W3): each review is update_one({_id}, {$push: {reviews: review}}): the viral product's array
  grows without bound, to 400 elements. mongotap should report unbounded_array_growth on DB.products,
  field reviews.
- subset (X2): the subset pattern: every review is insert_one'd into the reviews collection, and the
  product keeps only the 10 latest, update_one({_id}, {$push: {reviews: {$each: [review], $slice: -10}}}).
  mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
  fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
import datetime

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("push", "subset"))
client, db = fresh_db(uri, dbname)
ids = db.products.insert_many([{"name": f"Product {p}", "price": 10 + p, "reviews": []} for p in range(6)]).inserted_ids
viral, others = ids[0], ids[1:]
# 415 reviews in all: every 27th goes to one of the 5 others, the rest to the viral product
targets = [others[(n // 27) % 5] if n % 27 == 26 else viral for n in range(415)]
start = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)

for n, product_id in enumerate(targets):
    review = {"author": f"user{n % 97}", "stars": 1 + n % 5, "text": "Works as described. " * 3,
              "at": start + datetime.timedelta(minutes=n)}
    if mode == "push":
        result = db.products.update_one({"_id": product_id}, {"$push": {"reviews": review}})
    else:
        db.reviews.insert_one({"productId": product_id, **review})
        result = db.products.update_one({"_id": product_id}, {"$push": {"reviews": {"$each": [review], "$slice": -10}}})
    check(result.modified_count == 1, f"product {product_id} not updated")
sizes = sorted(len(p["reviews"]) for p in db.products.find({}, {"reviews": 1}))
check(sizes == ([3] * 5 + [400] if mode == "push" else [3] * 5 + [10]), f"unexpected review counts {sizes}")
print(f"{mode}: {len(targets)} reviews, array sizes {sizes}")
