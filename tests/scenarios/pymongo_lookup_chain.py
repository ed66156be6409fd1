"""P11: an order page built by one aggregate that joins three collections with $lookup (customers,
products, shippers), shown for 60 different orders.

mongotap should report lookup_chain on DB.orders, lookups [DB.customers, DB.products, DB.shippers].
"""
from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
db.customers.insert_many([{"_id": c, "name": f"Customer {c}", "city": f"City {c % 7}"} for c in range(20)])
db.products.insert_many([{"_id": p, "name": f"Product {p}", "price": 5 + p % 17} for p in range(40)])
db.shippers.insert_many([{"_id": s, "name": f"Shipper {s}"} for s in range(5)])
db.orders.insert_many([{"_id": o, "status": ("new", "paid", "shipped")[o % 3], "customerId": o % 20,
                        "productId": (o * 7) % 40, "shipperId": o % 5, "qty": 1 + o % 4} for o in range(150)])


def order_page(order_id):
    return list(db.orders.aggregate([
        {"$match": {"_id": order_id}},
        {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
        {"$lookup": {"from": "products", "localField": "productId", "foreignField": "_id", "as": "product"}},
        {"$lookup": {"from": "shippers", "localField": "shipperId", "foreignField": "_id", "as": "shipper"}},
        {"$project": {"status": 1, "qty": 1, "customer.name": 1, "product.name": 1, "product.price": 1,
                      "shipper.name": 1}},
    ]))


for i in range(60):
    rows = order_page((i * 37) % 150)  # 60 different orders, in no particular order
    check(len(rows) == 1 and len(rows[0]["customer"]) == len(rows[0]["product"]) == len(rows[0]["shipper"]) == 1,
          "the joins did not match")
print("60 order pages, 3 $lookup each")
