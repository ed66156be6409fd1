"""Two look-alikes from foreign traffic, both negative. Run as `pymongo_bulk_and_owned.py URI DBNAME`:

- MongoClient.bulk_write (the bulkWrite command, sent to the admin database): 10 calls of 500 upserts
  each with verbose results, so every reply's cursor carries 500 result documents with their upserted
  ids. Results are bookkeeping, not a collection's documents: no large_document (on admin or anywhere).
- Ownership checks, find_one({_id, userId}), 40 of them: the equality on _id is always served by the
  unique _id index, whatever else the filter holds. No missing_index.
mongotap should report no finding of any scored kind.
"""
from bson import ObjectId
from pymongo.operations import UpdateOne

from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)

upserted = 0
for call in range(10):
    ops = [UpdateOne({"_id": f"key-{call}-{i}"}, {"$set": {"seen": call, "note": "x" * 200}}, upsert=True,
                     namespace=f"{dbname}.keys") for i in range(500)]
    upserted += client.bulk_write(ops, verbose_results=True).upserted_count
check(upserted == 5000, f"{upserted} upserted")

users = [ObjectId() for _ in range(10)]
notes = [{"_id": ObjectId(), "userId": users[i % 10], "text": f"note {i}"} for i in range(40)]
db.notes.insert_many(notes)
found = sum(1 for n in notes if db.notes.find_one({"_id": n["_id"], "userId": n["userId"]}) is not None)
check(found == 40, f"{found} of 40 notes found by owner")
print(f"{upserted} upserts in 10 bulk writes, {found} owned notes read")
