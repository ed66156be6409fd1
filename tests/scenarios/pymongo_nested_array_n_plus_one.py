"""P7: N+1 through an array of sub-documents. An order page loads 10 orders, then every line item's
product with its own find_one.

mongotap should report n_plus_one on DB.orders -> DB.products, link items.productId -> _id.
"""
from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
db.products.insert_many([{"_id": p, "name": f"Product {p}", "price": 5 + p % 17} for p in range(1, 41)])
db.orders.insert_many([
    {"_id": o, "customer": f"customer{o % 9}",
     "items": [{"productId": (o * 3 + j * 11) % 40 + 1, "qty": 1 + (o + j) % 3} for j in range(2 + o % 3)]}
    for o in range(1, 41)])

lookups = 0
for page in range(10):
    orders = list(db.orders.find().sort("_id", -1).skip(page * 2).limit(10))
    distinct = {item["productId"] for order in orders for item in order["items"]}
    check(len(distinct) >= 8, f"page {page} has only {len(distinct)} distinct products")
    for order in orders:
        for item in order["items"]:
            product = db.products.find_one({"_id": item["productId"]})
            check(product is not None, f"product {item['productId']} not found")
            lookups += 1
print(f"10 pages, {lookups} product lookups")
