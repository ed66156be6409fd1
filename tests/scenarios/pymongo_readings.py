"""W6, X3: 20 sensors report 1,500 readings (sensorId, ts, value), one a minute each, written as fast as
they come. Run as `pymongo_readings.py URI DBNAME MODE`:

- per_reading (W6): one document per reading, readings.insert_one({sensorId, ts, value}): 75 small
  documents per sensor. mongotap should report bucket_candidate on DB.readings, field sensorId.
- bucket (X3): the bucket pattern: a document per sensor and hour holding up to 200 readings,
  update_one({sensorId, hour, count: {$lt: 200}}, {$push: {r: {t, v}}, $inc: {count: 1}}, upsert=True).
  mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
  fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
from common import args, check, fresh_db, sensor_readings

uri, dbname, mode = args(modes=("per_reading", "bucket"))
client, db = fresh_db(uri, dbname)

for sensor, ts, value in sensor_readings():
    if mode == "per_reading":
        db.readings.insert_one({"sensorId": sensor, "ts": ts, "value": value})
    else:
        hour = ts.replace(minute=0, second=0, microsecond=0)
        db.readings.update_one({"sensorId": sensor, "hour": hour, "count": {"$lt": 200}},
                               {"$push": {"r": {"t": ts, "v": value}}, "$inc": {"count": 1}}, upsert=True)
counts = list(db.readings.aggregate([{"$group": {"_id": None, "docs": {"$sum": 1}, "readings": {"$sum": "$count"}}}]))
docs = counts[0]["docs"]
check(docs == (1500 if mode == "per_reading" else 40), f"{docs} documents")
check(mode == "per_reading" or counts[0]["readings"] == 1500, f"{counts[0]['readings']} readings in the buckets")
print(f"{mode}: 1500 readings of 20 sensors in {docs} documents")
