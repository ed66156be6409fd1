"""P1: the classic N+1. A blog's front page loads 20 posts, then each post's author one by one.

mongotap should report n_plus_one on DB.posts -> DB.users, link authorId -> _id.
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db)

lookups = 0
for page in range(10):
    posts = list(db.posts.find().sort("_id", -1).skip(page * 4).limit(20))
    for post in posts:
        author = db.users.find_one({"_id": post["authorId"]}, {"name": 1})
        check(author is not None, f"author of {post['title']} not found")
        lookups += 1
check(lookups == 200, f"expected 200 author lookups, did {lookups}")
print(f"10 pages, {lookups} author lookups")
