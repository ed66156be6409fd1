"""A customer page that shows the customer's order count and total spent. Run as
`pymongo_customer_totals.py URI DBNAME MODE`:

- recompute (C1): 300 orders of 60 customers are in place; then 120 page views, each running the same
  aggregation ($match on customerId, $group with $sum) for one customer, while 3 orders come in. The totals
  are recomputed 40 times per write: mongotap should report computed_candidate on DB.orders.
- busy (C2): the same aggregation, but on a back-office screen run 20 times while orders pour in (10 per
  view). No finding: the inputs change more often than the result is read.
"""
from common import args, check, fresh_db

uri, dbname, mode = args(modes=("recompute", "busy"))
client, db = fresh_db(uri, dbname)
db.orders.create_index("customerId")  # the aggregation's $match is served: only recomputing is at stake
db.orders.insert_many([{"_id": i, "customerId": i % 60, "total": 10 + i % 17} for i in range(300)])


def totals(customer):
    return list(db.orders.aggregate([
        {"$match": {"customerId": customer}},
        {"$group": {"_id": "$customerId", "spent": {"$sum": "$total"}, "orders": {"$sum": 1}}},
    ]))


next_id = 300
views = 120 if mode == "recompute" else 20
for view in range(views):
    if mode == "busy" or view % 40 == 0:
        for _ in range(10 if mode == "busy" else 1):
            db.orders.insert_one({"_id": next_id, "customerId": next_id % 60, "total": 12})
            next_id += 1
    page = totals(view % 60)
    check(page and page[0]["orders"] >= 5, f"customer {view % 60}: {page}")
print(f"{mode}: {views} views, {next_id - 300} orders written during them")
