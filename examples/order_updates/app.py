"""Orders rewritten whole on every change.

Adding lines to open orders: 40 lines added to 5 orders of 10 lines each.

bad:   the app loads the order, appends the line in memory and writes the whole order
       back with replace_one: every change ships every line, the customer and all.
fixed: the same change as one field-level update: $push the line, $inc the total.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("order_updates")


def line(n):
    return {"sku": f"SKU-{n:05d}", "name": f"Item {n}", "qty": 1 + n % 3, "price": 2.5 + (n % 17) * 1.25}


orders = []
for o in range(5):
    lines = [line(o * 1000 + k) for k in range(10)]
    orders.append({"customer": {"name": f"Customer {o}", "email": f"customer{o}@example.com", "city": "Lyon"},
                   "status": "open", "lines": lines, "total": sum(i["qty"] * i["price"] for i in lines)})
ids = db.orders.insert_many(orders).inserted_ids


def add_line(order_id, new):
    if version == "bad":
        order = db.orders.find_one({"_id": order_id})
        order["lines"].append(new)
        order["total"] += new["qty"] * new["price"]
        return db.orders.replace_one({"_id": order_id}, order)
    return db.orders.update_one({"_id": order_id}, {"$push": {"lines": new}, "$inc": {"total": new["qty"] * new["price"]}})


for i in range(40):
    think()
    check(add_line(ids[i % 5], line(90_000 + i)).modified_count == 1, "an order was not updated")
check(all(len(o["lines"]) == 18 for o in db.orders.find()), "an order does not have 18 lines")
print(f"{version}: 40 lines added to 5 orders")
