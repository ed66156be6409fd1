"""X7: one comment pushed into each of 400 posts, update_one({_id}, {$push: {comments: comment}}), once
per post: many $push, but no array grows past one element.

mongotap should report none of full_document_rewrite, unbounded_array_growth, large_document,
fan_out_update, bucket_candidate (and no n_plus_one, redundant_query, lookup_chain).
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
user_ids = seed_blog(db, posts=400)
post_ids = [p["_id"] for p in db.posts.find({}, {"_id": 1})]
check(len(post_ids) == 400, "posts missing")
for n, post_id in enumerate(post_ids):
    comment = {"authorId": user_ids[n % len(user_ids)], "text": f"First! ({n})"}
    check(db.posts.update_one({"_id": post_id}, {"$push": {"comments": comment}}).modified_count == 1,
          f"post {post_id} not updated")
print("400 posts, one comment each")
