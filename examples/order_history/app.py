"""A customer's order history without its index.

A customer's order history: their shipped orders, newest first, 10 a page.

bad:   the only index is {createdAt: 1}: each page walks it backwards for the sort
       and checks every order on the way for the customer and the status.
fixed: the Equality-Sort-Range index for the query, {customerId: 1, status: 1, createdAt: -1}:
       the equality fields first, then the sort field.
"""
import os
import sys

import pymongo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("order_history")
db.orders.insert_many([{"customerId": i % 20, "status": "shipped" if (i // 20) % 2 == 0 else "open",
                        "createdAt": i, "total": i * 3} for i in range(400)])
db.orders.create_index([("createdAt", pymongo.ASCENDING)])
if version == "fixed":
    db.orders.create_index([("customerId", 1), ("status", 1), ("createdAt", -1)])
for i in range(30):
    think()
    page = list(db.orders.find({"customerId": i % 20, "status": "shipped"}).sort("createdAt", -1).limit(10))
    check(len(page) == 10, f"a history page of {len(page)} orders")
print(f"{version}: 30 order-history pages")
