"""X4: a one-off migration: 500 documents, then one update_many({}, {$set: {schemaVersion: 2}}) that
touches every one of them, once. A multi-document update, but not a copy kept in sync on every change.

mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
db.customers.insert_many([{"name": f"Customer {c}", "email": f"customer{c}@example.com", "schemaVersion": 1}
                          for c in range(500)])
result = db.customers.update_many({}, {"$set": {"schemaVersion": 2}})
check(result.matched_count == 500 and result.modified_count == 500,
      f"{result.matched_count} matched, {result.modified_count} modified")
print("migration: 500 documents to schemaVersion 2")
