"""X8: an order's history as events, order_events.insert_one({orderId, at, kind}), one at a time: 600
orders with 1 to 3 events each (placed, then maybe paid, then maybe shipped), about 1,200 inserts with a
date field, but no source (orderId) with more than 3 of them: not a time series to bucket.

mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
import datetime

from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
start = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
inserted = 0
for order in range(600):
    for step, kind in enumerate(("placed", "paid", "shipped")[:1 + order % 3]):
        db.order_events.insert_one({"orderId": 10_000 + order, "kind": kind,
                                    "at": start + datetime.timedelta(minutes=order, seconds=step * 17)})
        inserted += 1
check(db.order_events.count_documents({}) == inserted == 1200, f"{inserted} events")
print(f"600 orders, {inserted} events")
