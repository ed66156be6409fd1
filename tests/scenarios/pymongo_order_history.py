"""The index advisor on a customer's order history (the seed's ESR example), run as
`pymongo_order_history.py URI DBNAME MODE`:

- missing (I1): only {createdAt: 1} exists; 30 history pages find({customerId, status}) sorted by
  createdAt descending. mongotap should report missing_index on DB.orders with the key
  {customerId: 1, status: 1, createdAt: -1} (the first field is customerId: equal weights sort by name).
- indexed (I2): {status: 1, customerId: 1, createdAt: -1} and {createdAt: 1} exist (equalities in the
  other order); the same pages, finds by _id and a createdAt range sorted by createdAt. mongotap should
  report nothing.
- or_branch (I3): users log in by email or phone ($or); only email has a (unique) index. mongotap should
  report missing_index on DB.users for the phone branch ({phone: 1}).
"""
import pymongo

from common import args, check, fresh_db

uri, dbname, mode = args(["missing", "indexed", "or_branch"])
client, db = fresh_db(uri, dbname)

if mode == "or_branch":
    db.users.insert_many([{"email": f"u{i}@example.com", "phone": f"+1555{i:04d}", "name": f"U {i}"}
                          for i in range(200)])
    db.users.create_index("email", unique=True)
    for i in range(20):
        who = f"u{i}@example.com" if i % 2 else f"+1555{i:04d}"
        check(db.users.find_one({"$or": [{"email": who}, {"phone": who}]}) is not None, f"no user {who}")
    print("20 logins by email or phone")
else:
    db.orders.insert_many([{"customerId": i % 20, "status": "shipped" if (i // 20) % 2 == 0 else "open",
                            "createdAt": i, "total": i * 3} for i in range(400)])
    db.orders.create_index([("createdAt", pymongo.ASCENDING)])
    if mode == "indexed":
        db.orders.create_index([("status", 1), ("customerId", 1), ("createdAt", -1)])
    for i in range(30):
        page = list(db.orders.find({"customerId": i % 20, "status": "shipped"})
                    .sort("createdAt", pymongo.DESCENDING).limit(10))
        check(len(page) == 10, f"history page of customer {i % 20} has {len(page)} orders")
    if mode == "indexed":
        first = db.orders.find_one(sort=[("_id", 1)])["_id"]
        for i in range(20):
            db.orders.find_one({"_id": first})
            check(len(list(db.orders.find({"createdAt": {"$gte": i * 10}}).sort("createdAt", 1).limit(5))) == 5,
                  "range page too short")
    print(f"{mode}: 30 order-history pages")
