"""N9: the extended-reference pattern. Posts embed the fields of their author the page shows
(author: {_id, name}), so the page reads posts only.

mongotap should report nothing (no n_plus_one, no redundant_query).
"""
from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
user_ids = db.users.insert_many(
    [{"name": f"User {i}", "email": f"user{i}@example.com"} for i in range(30)]).inserted_ids
db.posts.insert_many([{"author": {"_id": user_ids[(i * 7) % 30], "name": f"User {(i * 7) % 30}"},
                       "title": f"Post {i}", "body": "Lorem ipsum. " * 20} for i in range(60)])

for page in range(10):
    posts = list(db.posts.find({}, {"title": 1, "author": 1}).sort("_id", -1).skip(page * 4).limit(20))
    check(len(posts) == 20 and all(p["author"]["name"] for p in posts), "bad page")
print("10 pages, posts only")
