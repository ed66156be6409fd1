"""Shared helpers of the Python scenario clients: arguments, a fresh database, the blog, order and
sensor data sets, and the concurrent front-page-and-profiles workload of N8 and N11.

Every client is run as `PROGRAM URI DBNAME [MODE]`; it drops DBNAME, seeds it, runs its workload and exits 0.
"""
import datetime
import random
import sys
import threading
import time

import pymongo


def args(modes=None):
    """(uri, dbname), or (uri, dbname, mode) when the client takes a MODE, one of `modes`."""
    want = 3 if modes is None else 4
    if len(sys.argv) != want or (modes is not None and sys.argv[3] not in modes):
        sys.exit(f"usage: {sys.argv[0]} URI DBNAME" + (f" {'|'.join(modes)}" if modes else ""))
    return tuple(sys.argv[1:])


def fresh_db(uri, dbname, **client_options):
    """A client and an empty database DBNAME."""
    client = pymongo.MongoClient(uri, **client_options)
    client.drop_database(dbname)
    return client, client[dbname]


def seed_blog(db, users=30, posts=60, author_of=lambda i: (i * 7) % 30):
    """users (ObjectId _id, name, email) and posts (authorId -> users._id, title, body).

    The default author_of spreads authors so that any 20 consecutive posts have 20 distinct authors.
    Returns the users' ids in insertion order.
    """
    user_ids = db.users.insert_many(
        [{"name": f"User {i}", "email": f"user{i}@example.com"} for i in range(users)]).inserted_ids
    db.posts.insert_many([{"authorId": user_ids[author_of(i)], "title": f"Post {i}", "body": "Lorem ipsum. " * 20}
                          for i in range(posts)])
    return user_ids


def order_line(n):
    """The n-th order line: {sku, name, qty, price}."""
    return {"sku": f"SKU-{n:05d}", "name": f"Item {n}", "qty": 1 + n % 3, "price": 2.5 + (n % 17) * 1.25}


def seed_orders(collection, orders=5, lines=10):
    """`orders` open orders (ObjectId _id) of `lines` lines each, with a customer sub-document and a total.
    Returns their ids."""
    docs = []
    for o in range(orders):
        items = [order_line(o * 1000 + k) for k in range(lines)]
        docs.append({"customer": {"name": f"Customer {o}", "email": f"customer{o}@example.com", "city": "Lyon"},
                     "status": "open", "lines": items, "total": sum(i["qty"] * i["price"] for i in items)})
    return collection.insert_many(docs).inserted_ids


def sensor_readings(count=1500, sensors=20):
    """`count` readings (sensorId, ts, value) of `sensors` sensors, round-robin, each sensor one a minute
    from 2024-05-01 00:00 UTC on."""
    start = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    for i in range(count):
        minute, sensor = divmod(i, sensors)
        yield f"sensor-{sensor:02d}", start + datetime.timedelta(minutes=minute), 20.0 + (i * 37 % 100) / 10


def check(cond, message):
    if not cond:
        sys.exit(f"scenario failed: {message}")


def front_page_and_profiles(db, *, duration, pages, readers, next_user):
    """Independent concurrent traffic on one pooled client, for `duration` seconds:

    - one thread renders the front page 20 ms apart, like a user clicking through the list: page k of
      `pages` in turn (20 posts, newest first), then the page's authors with ONE find({_id: {$in: ids}});
    - `readers` threads read user profiles, users.find_one({_id}), as fast as they can, each with the ids
      next_user(rng) yields (rng: that thread's own random.Random).

    Returns (front pages rendered, profile reads).
    """
    stop = time.monotonic() + duration
    counts, errors, lock = [0, 0], [], threading.Lock()

    def front_page():
        n = 0
        while time.monotonic() < stop:
            posts = list(db.posts.find().sort("_id", -1).skip((n % pages) * 20).limit(20))
            ids = sorted({p["authorId"] for p in posts})
            authors = list(db.users.find({"_id": {"$in": ids}}, {"name": 1}))
            if len(posts) != 20 or len(authors) != len(ids):
                errors.append(f"page {n}: {len(posts)} posts, {len(authors)} of {len(ids)} authors")
            n += 1
            time.sleep(0.02)
        with lock:
            counts[0] += n

    def profiles(seed):
        n = 0
        for user_id in next_user(random.Random(seed)):
            if time.monotonic() >= stop:
                break
            if db.users.find_one({"_id": user_id}) is None:
                errors.append(f"no user {user_id}")
            n += 1
        with lock:
            counts[1] += n

    threads = [threading.Thread(target=front_page)] + [threading.Thread(target=profiles, args=(s,))
                                                       for s in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "; ".join(errors[:3]))
    return tuple(counts)
