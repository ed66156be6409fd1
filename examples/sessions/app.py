"""Sessions that expire after 30 days of inactivity.

600 sessions are in place, last seen over the past 60 days; each "night" (0.3 s
apart here) 10 more sessions pass 30 days of inactivity.

bad:   a janitor job deletes the sessions last seen more than 30 days ago, every
       night: delete_many({lastSeen: {$lt: now - 30 days}}), a scan and a burst of
       deletes on a schedule the application has to keep running.
fixed: a TTL index on lastSeen (expireAfterSeconds: 30 days): the server removes
       expired sessions itself, in the background, and the janitor is gone.
"""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("sessions")
MONTH = datetime.timedelta(days=30)
if version == "bad":
    db.sessions.create_index("lastSeen")
else:
    db.sessions.create_index("lastSeen", expireAfterSeconds=int(MONTH.total_seconds()))
now = datetime.datetime.now(datetime.timezone.utc)
db.sessions.insert_many([{"user": f"u{i}", "lastSeen": now - datetime.timedelta(days=i % 60, hours=i % 24)}
                         for i in range(600)])
deleted = 0
for night in range(6):
    limit = datetime.datetime.now(datetime.timezone.utc) - MONTH
    if version == "bad":
        deleted += db.sessions.delete_many({"lastSeen": {"$lt": limit}}).deleted_count
    db.sessions.insert_many([{"user": f"n{night}-{i}", "lastSeen": limit - datetime.timedelta(hours=i)}
                             for i in range(10)])
    time.sleep(0.3)
check(version == "fixed" or deleted > 0, "the janitor deleted nothing")
print(f"{version}: {deleted} sessions deleted by the application")
