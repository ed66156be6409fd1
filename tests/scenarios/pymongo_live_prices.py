"""N-W6 (pymongo): live prices. Run as `pymongo_live_prices.py URI DBNAME`.

An order page shows its lines with each product's current price: the order, then its products by $in. A
pricing job changes prices all the time (one price update per page view). Orders and products are read
together, products are shared, but the fields the page reads change as often as they are read: copying
them into orders would rewrite every order at each change. The verdict for orders -> products
(lines.productId -> _id) must be reference, with no extended_reference_candidate.
"""
import random
import time

from common import args, check, fresh_db

THINK = 0.06
uri, dbname = args()
client, db = fresh_db(uri, dbname)
rng = random.Random(3)
db.products.insert_many([{"_id": f"P-{p:03d}", "name": f"Product {p}", "price": 10.0 + p} for p in range(20)])
db.orders.insert_many([{"_id": 9000 + o, "lines": [{"productId": f"P-{(o * 3 + k) % 20:03d}", "qty": 1 + k} for k in range(3)]}
                       for o in range(40)])
time.sleep(0.3)
for view in range(50):
    order = db.orders.find_one({"_id": 9000 + rng.randrange(40)})
    prices = list(db.products.find({"_id": {"$in": [line["productId"] for line in order["lines"]]}}, {"price": 1}))
    check(len(prices) >= 1, "prices")
    time.sleep(THINK)
    db.products.update_one({"_id": f"P-{rng.randrange(20):03d}"}, {"$set": {"price": round(10 + rng.random() * 90, 2)}})
    time.sleep(THINK)
print("50 order pages, 50 price changes")
