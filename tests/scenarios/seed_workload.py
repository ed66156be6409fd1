"""W1 (pymongo): the seeds' own access-pattern table, planted. Run as `seed_workload.py URI DBNAME`.

The guide lists four operations with their frequency; this client runs them in that proportion, a user's
think time apart (as separate requests reach a server), in a random order:

  Operation                  Runs  Steps
  Show order with lines        48  orders by _id, then customers by _id via customerId, then products by _id
                                   via lines.productId (one $in)
  Add order line               20  update orders by _id ($push lines)
  Customer order history        8  orders by customerId, newest first
  Update customer address       4  update customers by _id ($set address)

mongotap should list these four operations with these counts (within 5%) and answer per relationship:
orders -> customers (customerId -> _id): read together on every order page, customers shared by many orders
and rarely written -> extended_reference (copy name); orders -> products (lines.productId -> _id): the same,
products never written -> extended_reference. Findings: the two extended_reference_candidate.
"""
import datetime
import random
import time

from common import args, check, fresh_db

THINK = 0.06  # a user's think time between requests: longer than mongotap's 50 ms operation gap
PLAN = [("show", 48), ("add_line", 20), ("history", 8), ("address", 4)]

uri, dbname = args()
client, db = fresh_db(uri, dbname)
rng = random.Random(7)
customers = [{"_id": 1000 + c, "name": f"Customer {c}", "email": f"c{c}@example.com",
              "address": {"city": "Lyon", "street": f"{c} rue X"}} for c in range(12)]
db.customers.insert_many(customers)
products = [{"_id": f"P-{p:03d}", "name": f"Product {p}", "price": 5 + p, "stock": 100} for p in range(30)]
db.products.insert_many(products)
start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
orders = []
for o in range(60):
    lines = [{"productId": products[(o * 7 + k) % 30]["_id"], "qty": 1 + k % 3} for k in range(3)]
    orders.append({"_id": 5000 + o, "customerId": customers[o % 12]["_id"], "createdAt": start + datetime.timedelta(hours=o),
                   "status": "open", "lines": lines})
db.orders.insert_many(orders)
db.orders.create_index([("customerId", 1), ("createdAt", -1)])
time.sleep(0.3)

plan = [op for op, n in PLAN for _ in range(n)]
rng.shuffle(plan)
done = {op: 0 for op, _ in PLAN}
for op in plan:
    order_id = 5000 + rng.randrange(60)
    if op == "show":
        order = db.orders.find_one({"_id": order_id})
        customer = db.customers.find_one({"_id": order["customerId"]}, {"name": 1})
        items = list(db.products.find({"_id": {"$in": [line["productId"] for line in order["lines"]]}}, {"name": 1, "price": 1}))
        check(customer and items, "an order page")
    elif op == "add_line":
        db.orders.update_one({"_id": order_id}, {"$push": {"lines": {"productId": products[rng.randrange(30)]["_id"], "qty": 1}}})
    elif op == "history":
        customer_id = customers[rng.randrange(12)]["_id"]
        list(db.orders.find({"customerId": customer_id}).sort("createdAt", -1).limit(10))
    else:
        customer_id = customers[rng.randrange(12)]["_id"]
        db.customers.update_one({"_id": customer_id}, {"$set": {"address": {"city": "Paris", "street": f"{rng.randrange(99)} rue Y"}}})
    done[op] += 1
    time.sleep(THINK)
print("ran " + ", ".join(f"{op} {n}" for op, n in done.items()))
