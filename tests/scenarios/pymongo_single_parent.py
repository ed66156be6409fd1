"""N6: a post page, 20 times: one post by _id, then its comments with one find({postId}).
Each parent returns one document and is followed by one child query: 1+1, not N+1.

mongotap should report nothing (no n_plus_one, no redundant_query).
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db)
post_ids = [p["_id"] for p in db.posts.find({}, {"_id": 1}).sort("_id", 1)]
db.comments.insert_many([{"postId": pid, "text": f"Comment {c}"} for i, pid in enumerate(post_ids)
                         for c in range(3 + i % 3)])

for pid in post_ids[:20]:
    post = db.posts.find_one({"_id": pid})
    comments = list(db.comments.find({"postId": post["_id"]}))
    check(len(comments) >= 3, "missing comments")
print("20 post pages, one comments query each")
