"""W1, X1: "add a line to an order", 40 times spread over 5 orders of 10 lines each (customer
sub-document, status, lines, total). Run as `pymongo_orders.py URI DBNAME MODE`:

- replace (W1): the application loads the order, find_one({_id}), appends the line in memory and writes
  the whole order back with replace_one({_id}, order): each write ships every line, the customer and all.
  mongotap should report full_document_rewrite on DB.orders.
- field_update (X1): the same change as one update_one({_id}, {$push: {lines: line}, $inc: {total: x}}).
  mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
  fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
from common import args, check, fresh_db, order_line, seed_orders

uri, dbname, mode = args(modes=("replace", "field_update"))
client, db = fresh_db(uri, dbname)
ids = seed_orders(db.orders)

for i in range(40):
    _id, line = ids[i % len(ids)], order_line(90_000 + i)
    if mode == "replace":
        order = db.orders.find_one({"_id": _id})
        order["lines"].append(line)
        order["total"] += line["qty"] * line["price"]
        result = db.orders.replace_one({"_id": _id}, order)
    else:
        result = db.orders.update_one({"_id": _id}, {"$push": {"lines": line},
                                                     "$inc": {"total": line["qty"] * line["price"]}})
    check(result.modified_count == 1, f"order {_id} not updated")
check(all(len(o["lines"]) == 18 for o in db.orders.find()), "an order does not have 18 lines")
print(f"{mode}: 40 lines added to 5 orders")
