"""A site-wide page-view counter.

Eight web workers (eight connections) serve 400 page views and count each one.

bad:   every view increments one counter document (update_one({_id: "pageviews"},
       {$inc: {views: 1}})): all eight workers write the same document, and writers
       of one document queue behind each other.
fixed: the counter spread over 16 documents (a worker increments one of them,
       chosen at random); the page that shows the total sums the 16.
"""
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("page_views", maxPoolSize=8)
SLOTS = 16
if version == "bad":
    db.stats.insert_one({"_id": "pageviews", "views": 0})
else:
    db.stats.insert_many([{"_id": f"pageviews-{n}", "views": 0} for n in range(SLOTS)])


def worker(seed):
    rng = random.Random(seed)
    for _ in range(50):
        counter = "pageviews" if version == "bad" else f"pageviews-{rng.randrange(SLOTS)}"
        db.stats.update_one({"_id": counter}, {"$inc": {"views": 1}})


threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
total = sum(d["views"] for d in db.stats.find({"_id": {"$regex": "^pageviews"}}))
check(total == 400, f"{total} views counted")
print(f"{version}: 400 views counted from 8 workers in {db.stats.count_documents({})} documents")
