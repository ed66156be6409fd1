"""I5: mongoengine declares the order history's index in `meta` ({customer: 1, created: -1}) and builds it
with ensure_indexes(); 30 history pages Order.objects(customer=...).order_by('-created')[:10].

mongotap should report nothing (no missing_index, no redundant_index, no unused_index).
"""
import datetime

import mongoengine as me

from common import args, check, fresh_db

uri, dbname = args()
client, _ = fresh_db(uri, dbname)
me.connect(host=uri, db=dbname, alias="default")


class Order(me.Document):
    customer = me.IntField(required=True)
    created = me.DateTimeField(required=True)
    total = me.IntField()
    meta = {"indexes": [("customer", "-created")]}


Order.ensure_indexes()
start = datetime.datetime(2026, 1, 1)
# load_bulk=False: mongoengine would otherwise read the 400 orders back with one find({_id: {$in}}),
# and the pages below, one per customer of that read, would look like its N+1 children on the wire.
Order.objects.insert([Order(customer=i % 20, created=start + datetime.timedelta(hours=i), total=i)
                      for i in range(400)], load_bulk=False)
for i in range(30):
    page = list(Order.objects(customer=i % 20).order_by("-created")[:10])
    check(len(page) == 10, f"history page {i} has {len(page)} orders")
print("30 order-history pages, indexed")
