"""Look-alikes of the bucket pattern's readings that are entities: 600 product reviews inserted one by
one, each with a creation date. Run as `pymongo_reviews_rated.py URI DBNAME MODE`:

- rated: reviews of 40 products by 100 users with a 1-5 rating and a short title; the rating has 5
  values and 120 reviews each, as a source of readings would, but it is a category of the reviews.
- worded: reviews of 20 products (30 each) with their words: free text makes them entities, never
  readings of a product.
mongotap should report no bucket_candidate (no finding of any scored kind).
"""
import datetime
import random

from bson import ObjectId

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("rated", "worded"))
client, db = fresh_db(uri, dbname)
rng = random.Random(7)
products = [ObjectId() for _ in range(40 if mode == "rated" else 20)]
users = [ObjectId() for _ in range(100)]
start = datetime.datetime(2026, 11, 2, 9, 0, tzinfo=datetime.timezone.utc)
words = ["Arrived on time and works as described.", "The colour is darker than in the pictures.",
         "Sturdy, but the instructions could be clearer.", "Would buy again; my second one already."]
for i in range(600):
    review = {"productId": products[i % len(products)], "userId": rng.choice(users),
              "rating": rng.randint(1, 5), "createdAt": start + datetime.timedelta(minutes=7 * i)}
    if mode == "rated":
        review["title"] = rng.choice(["Great", "OK", "Poor", "Fine"])
    else:
        review["text"] = " ".join(rng.choice(words) for _ in range(3))
    db.reviews.insert_one(review)
count = db.reviews.count_documents({})
check(count == 600, f"{count} reviews")
print(f"{mode}: 600 reviews of {len(products)} products")
