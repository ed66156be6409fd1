"""An order page assembled from four collections.

An order page: the order, its customer, the products of its lines and the shipper.

bad:   orders keep references only, and every page view joins them back together with
       three $lookup stages (customers, products, shippers).
fixed: the order embeds its lines (with the product name and price at the time of
       sale) and an extended reference to the customer ({_id, name, city}): the page is
       one find_one on orders. Shippers are five and never change: the app caches them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("order_page")
customers = [{"_id": c, "name": f"Customer {c}", "city": f"City {c % 7}", "email": f"c{c}@example.com"}
             for c in range(20)]
products = [{"_id": p, "name": f"Product {p}", "price": 5 + p % 17} for p in range(40)]
shippers = [{"_id": s, "name": f"Shipper {s}"} for s in range(5)]


def order(o):
    return {"_id": o, "status": ("new", "paid", "shipped")[o % 3], "shipperId": o % 5,
            "lines": [{"productId": (o * 7 + k) % 40, "qty": 1 + k} for k in range(3)], "customerId": o % 20}


if version == "bad":
    db.customers.insert_many(customers)
    db.products.insert_many(products)
    db.shippers.insert_many(shippers)
    db.orders.insert_many([order(o) for o in range(150)])

    def order_page(order_id):
        return next(db.orders.aggregate([
            {"$match": {"_id": order_id}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
            {"$lookup": {"from": "products", "localField": "lines.productId", "foreignField": "_id",
                         "as": "products"}},
            {"$lookup": {"from": "shippers", "localField": "shipperId", "foreignField": "_id", "as": "shipper"}},
        ]))
else:
    # The catalog and the customers still live in their own collections; the page
    # no longer needs them.
    db.customers.insert_many(customers)
    db.products.insert_many(products)
    db.shippers.insert_many(shippers)
    shipper_names = {s["_id"]: s["name"] for s in db.shippers.find()}  # five rows, cached at start
    docs = []
    for o in range(150):
        d = order(o)
        c = customers[d.pop("customerId")]
        d["customer"] = {"_id": c["_id"], "name": c["name"], "city": c["city"]}
        d["lines"] = [{**line, "name": products[line["productId"]]["name"], "price": products[line["productId"]]["price"]}
                      for line in d["lines"]]
        docs.append(d)
    db.orders.insert_many(docs)

    def order_page(order_id):
        page = db.orders.find_one({"_id": order_id})
        page["shipper"] = shipper_names[page["shipperId"]]
        return page

for i in range(60):
    think()
    page = order_page((i * 37) % 150)  # 60 different orders
    check(page is not None, "an order is missing")
print(f"{version}: 60 order pages")
