"""Counters written from a pool of 8 threads (8 connections). Run as `pymongo_hit_counter.py URI DBNAME MODE`:

- global (H1): every request bumps one site-wide counter, update_one({_id: "pageviews"}, {$inc: {views: 1}}),
  400 times from 8 threads. mongotap should report hot_document on DB.stats.
- spread (H2): the same requests bump per-product counters (40 products: none takes much of the writes),
  and one worker thread writes its job's progress 300 times (one writer waits for no one).
  mongotap should report nothing.
"""
import threading

from common import args, check, fresh_db

uri, dbname, mode = args(modes=("global", "spread"))
client, db = fresh_db(uri, dbname, maxPoolSize=8)
db.stats.insert_one({"_id": "pageviews", "views": 0})
db.products.insert_many([{"_id": i, "views": 0} for i in range(40)])
db.jobs.insert_one({"_id": "reindex", "done": 0})


def requests(worker):
    for i in range(50):
        if mode == "global":
            db.stats.update_one({"_id": "pageviews"}, {"$inc": {"views": 1}}, upsert=True)
        else:
            db.products.update_one({"_id": (worker * 50 + i) % 40}, {"$inc": {"views": 1}})


threads = [threading.Thread(target=requests, args=(w,)) for w in range(8)]
for t in threads:
    t.start()
if mode == "spread":
    for step in range(300):
        db.jobs.update_one({"_id": "reindex"}, {"$set": {"done": step + 1}})
for t in threads:
    t.join()
total = db.stats.find_one({"_id": "pageviews"})["views"] + sum(p["views"] for p in db.products.find({}, {"views": 1}))
check(total == 400, f"{total} views counted")
print(f"{mode}: 400 views counted from 8 threads")
