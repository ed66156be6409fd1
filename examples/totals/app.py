"""A customer page with the customer's order count and total spent.

300 orders of 60 customers are in place; then 60 page views, while 2 new orders
come in.

bad:   every page view recomputes the totals: an aggregation ($match on the
       customer, $group with $sum) over the customer's orders, 30 page views for
       each order placed.
fixed: the computed pattern: the totals live on the customer document, kept up to
       date when an order is placed ($inc), and the page reads them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("totals")
db.orders.create_index("customerId")
orders = [{"_id": i, "customerId": i % 60, "total": 10 + i % 17} for i in range(300)]
db.orders.insert_many(orders)
if version == "fixed":
    db.customers.insert_many([{"_id": c, "orders": sum(1 for o in orders if o["customerId"] == c),
                               "spent": sum(o["total"] for o in orders if o["customerId"] == c)}
                              for c in range(60)])


def place_order(order_id, customer, total):
    db.orders.insert_one({"_id": order_id, "customerId": customer, "total": total})
    if version == "fixed":
        db.customers.update_one({"_id": customer}, {"$inc": {"orders": 1, "spent": total}})


def page(customer):
    if version == "bad":
        rows = list(db.orders.aggregate([
            {"$match": {"customerId": customer}},
            {"$group": {"_id": "$customerId", "spent": {"$sum": "$total"}, "orders": {"$sum": 1}}},
        ]))
        return rows[0]["orders"], rows[0]["spent"]
    c = db.customers.find_one({"_id": customer})
    return c["orders"], c["spent"]


for view in range(60):
    if view % 30 == 0:
        place_order(300 + view // 30, view % 60, 12)
    think()
    count, spent = page(view % 60)
    check(count >= 5 and spent > 0, f"customer {view % 60}: {count} orders, {spent} spent")
print(f"{version}: 60 page views, 2 orders placed during them")
