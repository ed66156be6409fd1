"""pymongo and mongoengine, unmodified, through mongotap against SecantusDB.

Usage: smoke.py MONGOTAP_URI          (the upstream runs as a one-member replica set)
       smoke.py --auth MONGOTAP_URI   (the upstream runs with --auth; user 'app' exists)
Prints one line per check and exits non-zero on the first failure.
"""
import sys
import time

import mongoengine
import pymongo
from pymongo import CursorType, InsertOne, UpdateOne, DeleteOne
from pymongo.write_concern import WriteConcern


def check(name, cond):
    print(("ok   " if cond else "FAIL ") + name, flush=True)
    if not cond:
        sys.exit(1)


def crud(uri):
    client = pymongo.MongoClient(uri, appname="python-smoke")
    db = client.smoke
    db.drop_collection("people")
    db.drop_collection("cities")
    db.drop_collection("events")
    people, cities = db.people, db.cities
    cities.insert_many([{"_id": i, "name": f"city{i}"} for i in range(5)])
    # insert_many and bulk_write send kind-1 document sequences.
    people.insert_many([{"_id": i, "cityId": i % 5, "age": 20 + i % 50} for i in range(300)])
    r = people.bulk_write([InsertOne({"_id": 1000, "cityId": 1}), UpdateOne({"_id": 1}, {"$set": {"age": 99}}),
                           DeleteOne({"_id": 2})])
    check("bulk_write with document sequences", (r.inserted_count, r.modified_count, r.deleted_count) == (1, 1, 1))
    check("find with getMore chain", len(list(people.find({"age": {"$gte": 20}}, batch_size=50))) == 299)
    exhaust = list(people.find({}, cursor_type=CursorType.EXHAUST, batch_size=40))
    check("exhaust cursor", len(exhaust) == 300)
    joined = list(people.aggregate([{"$match": {"cityId": 3}},
                                    {"$lookup": {"from": "cities", "localField": "cityId", "foreignField": "_id",
                                                 "as": "city"}}]))
    check("aggregate with $lookup", len(joined) == 60 and all(len(p["city"]) == 1 for p in joined))
    w0 = db.get_collection("events", write_concern=WriteConcern(w=0))
    for i in range(20):
        w0.insert_one({"i": i})
    deadline = time.time() + 5
    while db.events.count_documents({}) < 20 and time.time() < deadline:
        time.sleep(0.05)
    check("w:0 writes (moreToCome)", db.events.count_documents({}) == 20)
    with client.start_session() as s:
        with s.start_transaction():
            people.update_one({"_id": 3}, {"$inc": {"age": 1}}, session=s)
            cities.insert_one({"_id": 99, "name": "tx"}, session=s)
    check("transaction committed", cities.find_one({"_id": 99}) is not None)
    # Idle past the 10 s awaitable hello: the streaming monitor must keep working.
    time.sleep(12)
    check("still serving after an idle period", people.count_documents({"cityId": 0}) == 60)
    client.close()


class Author(mongoengine.Document):
    name = mongoengine.StringField(required=True)
    meta = {"collection": "authors"}


class Post(mongoengine.Document):
    title = mongoengine.StringField()
    author = mongoengine.ReferenceField(Author)
    meta = {"collection": "posts"}


def orm(uri):
    mongoengine.connect(host=uri, db="blog", appname="mongoengine-smoke")
    Author.drop_collection()
    Post.drop_collection()
    authors = [Author(name=f"a{i}").save() for i in range(5)]
    for i in range(25):
        Post(title=f"p{i}", author=authors[i % 5]).save()
    # Dereferencing each post's author: the classic N+1 of an ORM.
    names = [p.author.name for p in Post.objects]
    check("mongoengine save and dereference", len(names) == 25)
    mongoengine.disconnect()


def auth(uri):
    client = pymongo.MongoClient(uri, appname="python-auth", authMechanism="SCRAM-SHA-256")
    client.app.things.insert_one({"x": 1})
    check("SCRAM-SHA-256 through the proxy", client.app.things.count_documents({}) >= 1)
    client.close()


if __name__ == "__main__":
    if sys.argv[1] == "--auth":
        auth(sys.argv[2])
    else:
        crud(sys.argv[1])
        orm(sys.argv[1])
