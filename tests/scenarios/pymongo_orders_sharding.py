"""The guides' exercise: "choose a shard key for an orders collection queried mostly by customer". Run as
`pymongo_orders_sharding.py URI DBNAME MODE`:

- customer (K1): 1,200 orders of 300 customers inserted over time (ObjectId `_id`, a rising `createdAt`, a
  `status` of four values); then the app lists a customer's orders newest first (80% of reads), opens one
  order by `_id`, counts open orders by status, and updates an order's status by `_id`. mongotap's shard_keys
  section should rank a key led by customerId first, mark `_id` and `createdAt` monotonic (not recommended
  ranged) and `status` not recommended (low cardinality).
- scattered (K2): events whose reads share no field: by time range, by a text field's prefix, by a kind with
  several values. The section should say plainly that reads would scatter.
- by_date (K3), by_customer (K4), by_hashed_id (K5): the customer workload on a collection already sharded,
  on `{createdAt: 1}` (a monotonic ranged key: a hot shard; a high bad_shard_key finding with the reshard
  command), on `{customerId: 1, createdAt: 1}` (it suits the traffic: no finding) or on `{_id: "hashed"}`,
  the common default (spread evenly, no flaw of its own, but the reads by customer give no `_id`: they go to
  every shard; a medium bad_shard_key finding). SecantusDB is no cluster: the script
  writes the document `mongos` keeps in `config.collections` first, and mongotap's side connection reads it
  as it would through `mongos` (the document stays: other scenarios' collections are not in it).
"""
import datetime
import random

from bson import ObjectId

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("customer", "scattered", "by_date", "by_customer", "by_hashed_id"))
client, db = fresh_db(uri, dbname)
if mode in ("by_date", "by_customer", "by_hashed_id"):
    key = {"by_date": {"createdAt": 1}, "by_customer": {"customerId": 1, "createdAt": 1},
           "by_hashed_id": {"_id": "hashed"}}[mode]
    client.config.collections.replace_one({"_id": f"{dbname}.orders"}, {"key": key, "unique": False}, upsert=True)
    mode = "customer"
rng = random.Random(7)
start = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)

if mode == "customer":
    db.orders.create_index([("customerId", 1), ("createdAt", -1)])
    db.orders.create_index("status")
    ids = []
    for i in range(1200):
        oid = ObjectId()
        ids.append(oid)
        db.orders.insert_one({"_id": oid, "customerId": rng.randrange(300), "createdAt": start + datetime.timedelta(minutes=i),
                              "status": ["placed", "paid", "shipped", "delivered"][i % 4], "total": rng.randrange(10, 500)})
    found = 0
    for i in range(400):
        found += len(list(db.orders.find({"customerId": rng.randrange(300)}).sort("createdAt", -1).limit(10)))
        if i % 8 == 0:
            found += db.orders.find_one({"_id": rng.choice(ids)}) is not None
        if i % 10 == 0:
            db.orders.update_one({"_id": rng.choice(ids)}, {"$set": {"status": "shipped"}})
        if i % 20 == 0:
            found += db.orders.count_documents({"status": "placed"}) > 0
    check(found > 0, "orders found")
else:
    db.events.create_index("at")
    db.events.create_index("kind")
    db.events.create_index("message")  # every read is served: only where it would go is at stake
    for i in range(600):
        db.events.insert_one({"at": start + datetime.timedelta(seconds=i * 7), "kind": f"k{i % 40}", "message": f"m{i:05}"})
    found = 0
    for i in range(150):
        lo = start + datetime.timedelta(seconds=rng.randrange(4000))
        found += len(list(db.events.find({"at": {"$gte": lo, "$lt": lo + datetime.timedelta(minutes=5)}})))
        found += len(list(db.events.find({"kind": {"$in": [f"k{rng.randrange(40)}", f"k{rng.randrange(40)}"]}}).limit(5)))
        found += len(list(db.events.find({"message": {"$regex": f"^m0{rng.randrange(6)}"}}).limit(5)))
    check(found > 0, "events found")
print(f"{mode}: done")
