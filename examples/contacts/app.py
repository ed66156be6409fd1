"""A customer's phone number, renamed by a release.

Release 1 of the CRM saved 60 customers with a `phone`; release 2 calls the field
`mobile` and saves 40 new customers; the profile page shows any customer's number.

bad:   release 2 writes `mobile` and leaves the old customers as they are: two
       field sets and no version field to tell them apart. Every reader must look
       for `phone` or `mobile`, and a query on `mobile` misses 60 customers.
fixed: release 2 finishes the rename before it writes (`$rename` of `phone` to
       `mobile` on the old customers): one field set.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("contacts")
db.customers.create_index("email", unique=True)
for i in range(60):  # release 1
    db.customers.insert_one({"name": f"Customer {i}", "email": f"c{i}@example.com", "phone": f"555-{i:04}"})
if version == "fixed":  # release 2's migration, before its first write
    db.customers.update_many({"phone": {"$exists": True}, "mobile": {"$exists": False}},
                             {"$rename": {"phone": "mobile"}})
for i in range(60, 100):  # release 2
    db.customers.insert_one({"name": f"Customer {i}", "email": f"c{i}@example.com", "mobile": f"555-{i:04}"})
shown = 0
for i in range(0, 100, 4):  # the profile page
    think()
    c = db.customers.find_one({"email": f"c{i}@example.com"})
    number = c.get("mobile") or c.get("phone") if version == "bad" else c["mobile"]
    shown += number == f"555-{i:04}"
check(shown == 25, f"{shown} of 25 numbers shown")
with_mobile = db.customers.count_documents({"mobile": {"$exists": True}})
print(f"{version}: {with_mobile} of 100 customers have a mobile field")
