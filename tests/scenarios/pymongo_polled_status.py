"""N10 (redundant_query's negative): a page polls a job's status while a worker moves it on: the same
find_one({_id: "job"}) 150 times, each after an update_one of that document through the same mongotap.
Every read can return something new, so mongotap should report nothing (no redundant_query).
"""
from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
db.jobs.insert_one({"_id": "job", "progress": 0, "state": "running"})
for i in range(1, 151):
    db.jobs.update_one({"_id": "job"}, {"$set": {"progress": i}})
    check(db.jobs.find_one({"_id": "job"})["progress"] == i, "a stale status")
print("150 status polls, each after the worker's update")
