"""A blog with a viral post.

A blog with a viral post: the front page shows 20 posts with their authors, and readers
comment, one post far more than the others; the viral post's page is read after every 10
comments.

bad:   the front page loads the posts, then each post's author one by one (N+1), and every
       comment is $push'ed into its post, so the viral post's array grows without bound.
fixed: one find with $in for the page's authors; comments live in their own collection
       (referenced by postId) and the post keeps only the 5 latest (the subset pattern,
       $push with $each and $slice).
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("blog")
user_ids = db.users.insert_many([{"name": f"User {i}", "email": f"user{i}@example.com"}
                                 for i in range(30)]).inserted_ids
post_ids = db.posts.insert_many([{"authorId": user_ids[(i * 7) % 30], "title": f"Post {i}",
                                  "body": "Lorem ipsum. " * 20, "comments": []} for i in range(60)]).inserted_ids


def front_page(page):
    # Pages of 20 that overlap (readers scroll 4 posts at a time).
    posts = list(db.posts.find({}, {"title": 1, "authorId": 1}).sort("_id", -1).skip(page * 4).limit(20))
    if version == "bad":
        for post in posts:
            post["author"] = db.users.find_one({"_id": post["authorId"]}, {"name": 1})
    else:
        authors = {u["_id"]: u for u in db.users.find({"_id": {"$in": [p["authorId"] for p in posts]}}, {"name": 1})}
        for post in posts:
            post["author"] = authors[post["authorId"]]
    return posts


def comment(post_id, n):
    c = {"author": f"reader{n % 97}", "text": "Great post, thanks! " * 3,
         "at": datetime.datetime(2024, 5, 1) + datetime.timedelta(minutes=n)}
    if version == "bad":
        db.posts.update_one({"_id": post_id}, {"$push": {"comments": c}})
    else:
        db.comments.insert_one({"postId": post_id, **c})
        db.posts.update_one({"_id": post_id}, {"$push": {"comments": {"$each": [c], "$slice": -5}}})


for page in range(10):
    think()
    check(all(p["author"] for p in front_page(page)), "a post without its author")
viral = post_ids[0]
for n in range(330):  # the viral post gets 300 comments; five others get 6 each
    comment(viral if n % 11 else post_ids[1 + (n // 11) % 5], n)
    if n % 10 == 9:  # the post page: the post and the comments it shows
        check(db.posts.find_one({"_id": viral}) is not None, "the viral post is gone")
size = len(db.posts.find_one({"_id": viral})["comments"])
check(size == (300 if version == "bad" else 5), f"the viral post holds {size} comments")
print(f"{version}: 10 front pages, 330 comments; the viral post holds {size}")
