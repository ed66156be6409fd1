"""Sensor readings, one document each.

Sensor readings: 20 sensors report one reading a minute each, 1,500 readings in all,
and a dashboard charts each sensor's readings.

bad:   one document per reading (insert_one of {sensorId, ts, value}): many tiny
       documents, each with its own _id, index entries and per-document overhead.
fixed: the bucket pattern: one document per sensor and hour (60 readings at this rate;
       the count caps a bucket at 200 should the rate rise),
       update_one({sensorId, hour, count < 200}, {$push, $inc}, upsert=True), with the
       Equality-Sort-Range index that update needs ({sensorId: 1, hour: 1, count: 1}).
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("sensors")
if version == "bad":
    db.readings.create_index([("sensorId", 1), ("ts", 1)])
else:
    db.readings.create_index([("sensorId", 1), ("hour", 1), ("count", 1)])
start_at = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
for i in range(1500):
    minute, sensor = divmod(i, 20)
    sensor_id, ts, value = f"sensor-{sensor:02d}", start_at + datetime.timedelta(minutes=minute), 20.0 + (i * 37 % 100) / 10
    if version == "bad":
        db.readings.insert_one({"sensorId": sensor_id, "ts": ts, "value": value})
    else:
        hour = ts.replace(minute=0, second=0, microsecond=0)
        db.readings.update_one({"sensorId": sensor_id, "hour": hour, "count": {"$lt": 200}},
                               {"$push": {"r": {"t": ts, "v": value}}, "$inc": {"count": 1}}, upsert=True)
for sensor in range(20):  # the dashboard: one chart per sensor
    think()
    chart = list(db.readings.find({"sensorId": f"sensor-{sensor:02d}"}))
    points = len(chart) if version == "bad" else sum(b["count"] for b in chart)
    check(points == 75, f"sensor {sensor} has {points} readings")
docs = db.readings.count_documents({})
check(docs == (1500 if version == "bad" else 40), f"{docs} documents")
print(f"{version}: 1500 readings in {docs} documents")
