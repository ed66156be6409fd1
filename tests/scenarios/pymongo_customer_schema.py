"""A customers collection written by more than one hand. Run as `pymongo_customer_schema.py URI DBNAME MODE`:

- drift (S1): the CRM (this client) inserts 60 customers with a numeric `score`; a legacy importer, a second
  client with its own appName, inserts 10 more with the score as a string ("7"). Both are read back by email.
  mongotap should report schema_drift on DB.customers, field score, naming the importer as the writer of the
  strings, and its schemas section should infer a validator requiring name, email and score.
- versions (S2): the schema versioning pattern done right: 40 customers at schemaVersion 1 (a `phone` string)
  and 40 at schemaVersion 2 (a `contact` sub-document), every field of one type. mongotap should report no
  drift and name schemaVersion as the version field in the schemas section.
- text_versions (S4): the same pattern with version strings ("v1" with a `phone`, "v2.0" with `contact`), as
  some teams write them: schemaVersion named as the version field.
- release (S5): a `version` string naming the app release that last saved the document ("3.2.0", "3.2.1",
  "3.3.0"), the same fields in every release: a version-like string that partitions nothing. No version field.
- renamed (S6): a rename left half done, with no version field: the old code saved 50 customers with a
  `phone`, the new code saves 40 more with a `mobile` instead; both are read back by email. schema_drift on
  DB.customers, field mobile (the old field phone), with the $rename that finishes it.
- either (S7): customers give a phone or a telegram handle, whichever they have, saved interleaved: two field
  sets by design, no drift.
- verified (S8): sign-ups carry a `verifyToken` until the customer follows the link, when the app sets
  `verifiedAt` and unsets the token: older customers have one field, newer ones the other, as in `renamed`, but
  their updates moved them, no migration. No drift.
- lock (S3): an optimistic lock's `version` counter bumped on every save: the values change, the fields do not.
  No finding, and no version field in the schemas section.
"""
import datetime

import pymongo

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("drift", "versions", "text_versions", "release", "renamed", "either", "verified", "lock"))
client, db = fresh_db(uri, dbname)
now = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
db.customers.create_index("email", unique=True)  # the reads below are served: only the schema is at stake


def customer(i, **extra):
    return {"name": f"Customer {i}", "email": f"c{i}@example.com", "score": i % 10,
            "createdAt": now - datetime.timedelta(days=i), **extra}


if mode == "drift":
    db.customers.insert_many([customer(i, phone=f"555-{i:04}") for i in range(60)])
    legacy_uri = uri.replace(f"appName={dbname}", f"appName={dbname}-importer")
    legacy = pymongo.MongoClient(legacy_uri)
    for i in range(60, 70):
        legacy[dbname].customers.insert_one(customer(i, phone=f"555-{i:04}") | {"score": str(i % 10)})
    legacy.close()
elif mode == "versions":
    db.customers.insert_many([customer(i, schemaVersion=1, phone=f"555-{i:04}") for i in range(40)])
    db.customers.insert_many([customer(i, schemaVersion=2, contact={"phone": f"555-{i:04}", "prefers": "email"})
                              for i in range(40, 80)])
elif mode == "text_versions":
    db.customers.insert_many([customer(i, schemaVersion="v1", phone=f"555-{i:04}") for i in range(40)])
    db.customers.insert_many([customer(i, schemaVersion="v2.0", contact={"phone": f"555-{i:04}", "prefers": "sms"})
                              for i in range(40, 80)])
elif mode == "release":
    releases = ["3.2.0", "3.2.1", "3.3.0"]
    db.customers.insert_many([customer(i, version=releases[i % 3], phone=f"555-{i:04}") for i in range(60)])
elif mode == "renamed":
    for i in range(50):
        db.customers.insert_one(customer(i, phone=f"555-{i:04}"))
    for i in range(50, 90):
        db.customers.insert_one(customer(i, mobile=f"555-{i:04}"))
elif mode == "either":
    for i in range(90):
        db.customers.insert_one(customer(i, **({"telegram": f"@c{i}"} if i % 3 == 0 else {"phone": f"555-{i:04}"})))
elif mode == "verified":
    for i in range(90):
        db.customers.insert_one(customer(i, verifyToken=f"t{i:04}"))
        if i >= 30:  # a customer verifies a while after signing up
            db.customers.update_one({"email": f"c{i - 30}@example.com"},
                                    {"$set": {"verifiedAt": now}, "$unset": {"verifyToken": ""}})
else:
    db.customers.insert_many([customer(i, version=0) for i in range(60)])
    for i in range(0, 60, 2):
        db.customers.update_one({"email": f"c{i}@example.com"}, {"$set": {"score": 9}, "$inc": {"version": 1}})

found = 0
for i in range(0, 60, 3):
    found += db.customers.find_one({"email": f"c{i}@example.com"}) is not None
check(found == 20, f"{found} of 20 customers found")
print(f"{mode}: {db.customers.count_documents({})} customers")
