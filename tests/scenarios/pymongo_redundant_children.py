"""P9: the N+1 loop of P1, but the whole blog is written by 2 authors: each page sends 20
find_one({_id: authorId}) with only 2 distinct values, i.e. the same 2 queries over and over.

mongotap should report redundant_query on DB.users, and no n_plus_one.
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db, author_of=lambda i: i % 2)

lookups = 0
for page in range(10):
    posts = list(db.posts.find().sort("_id", -1).skip(page * 4).limit(20))
    check(len({p["authorId"] for p in posts}) == 2, "expected 2 authors per page")
    for post in posts:
        check(db.users.find_one({"_id": post["authorId"]}, {"name": 1}) is not None, "author not found")
        lookups += 1
print(f"10 pages, {lookups} author lookups of 2 distinct users")
