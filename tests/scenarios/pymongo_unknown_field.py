"""P-U1, N-U1: fields no document carries. Run as `pymongo_unknown_field.py URI DBNAME MODE`:

- typo (P-U1): 600 tickets stored with `_id`, `status` and `createdAt`; the listing sorts on "id" (pymongo's
  sort("id") where the documents store _id) and a report filters on "created_at" (the documents say
  createdAt). mongotap should report unknown_field on DB.tickets for `id` (close field `_id`) and for
  `created_at` (close field `createdAt`), and no missing_index for either.
- absent_on_purpose (N-U1): the same tickets, queried on fields that are absent on purpose or rare: soft
  deletes ({deletedAt: {$exists: false}}), a flag 3 tickets in 600 carry ({escalated: true}, which returns
  them though the sampled documents may not show it), a legacy field inside an $or, and `_id`. No
  unknown_field (and no missing_index for the absent fields).
"""
import datetime

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("typo", "absent_on_purpose"))
client, db = fresh_db(uri, dbname)
start = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
tickets = []
for i in range(600):
    t = {"_id": i, "status": ("open", "closed")[i % 2], "createdAt": start + datetime.timedelta(minutes=i)}
    if i in (17, 290, 555):
        t["escalated"] = True
    tickets.append(t)
db.tickets.insert_many(tickets)
db.tickets.create_index([("status", 1), ("createdAt", -1)])
db.tickets.create_index("escalated", sparse=True)

if mode == "typo":
    for page in range(8):
        rows = list(db.tickets.find({"status": "open"}).sort("id").skip(page * 20).limit(20))
        check(len(rows) == 20, "a page of tickets")
        since = start + datetime.timedelta(hours=page)
        check(db.tickets.count_documents({"created_at": {"$gte": since}}) == 0, "created_at matches nothing")
    summary = "8 pages sorted on id, 8 counts on created_at"
else:
    for page in range(8):
        rows = list(db.tickets.find({"status": "open", "deletedAt": {"$exists": False}}).sort("createdAt", -1)
                    .skip(page * 20).limit(20))
        check(len(rows) == 20, "a page of live tickets")
        check(len(list(db.tickets.find({"escalated": True}))) == 3, "the escalated tickets")
        check(db.tickets.count_documents({"$or": [{"state": "open"}, {"status": "open"}]}) == 300, "legacy $or")
        check(db.tickets.find_one({"_id": page}) is not None, "a ticket by id")
    summary = "8 rounds of soft-delete pages, rare flags, a legacy $or and reads by _id"
print(f"{mode}: {summary}")
