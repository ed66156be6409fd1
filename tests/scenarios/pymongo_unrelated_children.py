"""N4: after P1's page the app loads 20 user profiles for a "who to follow" box: users who wrote none of
the page's posts. Many single-document finds on users follow a parent, but none uses a value of its reply.

mongotap should report nothing (no n_plus_one, no redundant_query).
"""
import random

from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
user_ids = seed_blog(db, users=60)  # posts are written by the first 30 users only
rng = random.Random(4)

for page in range(10):
    posts = list(db.posts.find().sort("_id", -1).skip(page * 4).limit(20))
    page_authors = {post["authorId"] for post in posts}
    suggestions = rng.sample([u for u in user_ids if u not in page_authors], 20)
    for user_id in suggestions:
        check(db.users.find_one({"_id": user_id}, {"name": 1}) is not None, "user not found")
print("10 pages, 20 unrelated profile reads each")
