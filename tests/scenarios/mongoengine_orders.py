"""W2, X6: mongoengine orders (collection 'order': customer, status, lines, total), each change made by
loading the order with Order.objects.get(id=...), changing it and calling save(), 40 times over 5 orders
of 10 lines each. Run as `mongoengine_orders.py URI DBNAME MODE`:

- append_line (W2): order.lines.append(Line(...)); order.total += ...; save(). mongoengine tracks the
  list as changed and sends update({_id}, {$set: {lines: [every line], total: x}}, upsert: true): the
  whole array, 11 to 18 lines, for one new line. mongotap should report full_document_rewrite on
  DB.order, field lines.
- set_status (X6): order.status = ...; save(), sent as update({_id}, {$set: {status: ...}}). mongotap
  should report none of full_document_rewrite, unbounded_array_growth, large_document, fan_out_update,
  bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
from mongoengine import (Document, EmbeddedDocument, EmbeddedDocumentField, FloatField, IntField, ListField,
                         StringField, connect)

from common import args, check, order_line, seed_orders

uri, dbname, mode = args(modes=("append_line", "set_status"))


class Customer(EmbeddedDocument):
    name = StringField()
    email = StringField()
    city = StringField()


class Line(EmbeddedDocument):
    sku = StringField()
    name = StringField()
    qty = IntField()
    price = FloatField()


class Order(Document):
    customer = EmbeddedDocumentField(Customer)
    status = StringField()
    lines = ListField(EmbeddedDocumentField(Line))
    total = FloatField()


connect(db=dbname, host=uri).drop_database(dbname)
ids = seed_orders(Order._get_collection())

for i in range(40):
    order = Order.objects.get(id=ids[i % len(ids)])
    if mode == "append_line":
        line = Line(**order_line(90_000 + i))
        order.lines.append(line)
        order.total += line.qty * line.price
    else:
        order.status = ("paid", "packed", "shipped", "delivered")[i // len(ids) % 4]
    order.save()
want = 18 if mode == "append_line" else 10
check(all(len(o.lines) == want for o in Order.objects), f"an order does not have {want} lines")
print(f"{mode}: 40 saves over 5 orders (collection {Order._get_collection_name()})")
