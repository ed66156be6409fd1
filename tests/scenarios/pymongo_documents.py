"""W7, X5: documents inserted once each with insert_one, never rewritten, then read back by _id,
find_one({_id}), in passes over all of them. Run as `pymongo_documents.py URI DBNAME MODE`:

- large (W7): 20 attachments {name, contentType, size, data} whose data is 2.5 MB of binary, each read
  back 3 times. mongotap should report large_document on DB.attachments.
- small (X5): 300 attachments of 200 bytes of data, each read back once. mongotap should report
  none of full_document_rewrite, unbounded_array_growth, large_document, fan_out_update,
  bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
import os

from bson import Binary

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("large", "small"))
count, size, passes = (20, 2_500_000, 3) if mode == "large" else (300, 200, 1)
client, db = fresh_db(uri, dbname)

ids = []
for n in range(count):
    ids.append(db.attachments.insert_one({"name": f"file-{n:03d}.bin", "contentType": "application/octet-stream",
                                          "size": size, "data": Binary(os.urandom(size))}).inserted_id)
for _ in range(passes):
    for _id in ids:
        doc = db.attachments.find_one({"_id": _id})
        check(doc is not None and len(doc["data"]) == size, f"attachment {_id} missing or short")
print(f"{mode}: {count} documents of {size} bytes of data, each read back {passes}x")
