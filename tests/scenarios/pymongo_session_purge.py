"""A janitor job keeps a sessions collection small, with an index on lastSeen. Run as
`pymongo_session_purge.py URI DBNAME MODE`:

- moving (T1): every "night" (0.3 s apart here), delete_many({lastSeen: {$lt: now - 30 days}}), 6 runs,
  while new sessions arrive and old ones age. mongotap should report ttl_candidate on DB.sessions, field
  lastSeen, with expireAfterSeconds 2592000.
- fixed (T2): an archive cleanup deletes by one fixed date, 6 times (a retry loop), and an operator purges
  carts twice by hand with different ages. mongotap should report nothing.
"""
import datetime
import time

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("moving", "fixed"))
client, db = fresh_db(uri, dbname)
now = datetime.datetime.now(datetime.timezone.utc)
db.sessions.create_index("lastSeen")
db.carts.create_index("updatedAt")
db.sessions.insert_many([{"user": f"u{i}", "lastSeen": now - datetime.timedelta(days=i % 60, hours=i % 24)}
                         for i in range(600)])
db.carts.insert_many([{"user": f"u{i}", "updatedAt": now - datetime.timedelta(days=i % 20)} for i in range(100)])

deleted = 0
if mode == "moving":
    for night in range(6):
        limit = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=30)
        deleted += db.sessions.delete_many({"lastSeen": {"$lt": limit}}).deleted_count
        db.sessions.insert_many([{"user": f"n{night}-{i}", "lastSeen": limit - datetime.timedelta(hours=i)}
                                 for i in range(10)])
        time.sleep(0.3)
else:
    archive = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    for attempt in range(6):
        deleted += db.sessions.delete_many({"lastSeen": {"$lt": archive}}).deleted_count
        time.sleep(0.3)
    for days in (14, 3):
        limit = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=days)
        deleted += db.carts.delete_many({"updatedAt": {"$lt": limit}}).deleted_count
check(mode == "fixed" or deleted > 0, "the purges deleted nothing")
print(f"{mode}: {deleted} documents deleted")
