"""A display name copied into every comment.

Comments show their author's display name, and users rename themselves.

bad:   every comment copies the author's name, and a rename rewrites all of that user's
       comments at once (updateMany on comments): one click, 150 documents rewritten.
fixed: an extended reference with controlled staleness: comments keep {authorId,
       authorName} as written, a rename updates the user only, and the pages that must be
       exact (the profile) read the name from users. A nightly job (not run here) may
       refresh old comments in small batches.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start, think  # noqa: E402

db, version = start("display_name")
db.users.insert_many([{"_id": u, "name": f"User {u}"} for u in range(1, 11)])
db.comments.insert_many([{"postId": 1 + c % 200, "authorId": 1 + c % 10, "authorName": f"User {1 + c % 10}",
                          "text": f"Comment {c}"} for c in range(1500)])
for u in range(1, 7):
    think()
    name = f"Renamed {u}"
    db.users.update_one({"_id": u}, {"$set": {"name": name}})
    if version == "bad":
        r = db.comments.update_many({"authorId": u}, {"$set": {"authorName": name}})
        check(r.modified_count == 150, f"rename {u} rewrote {r.modified_count} comments")
    profile = db.users.find_one({"_id": u}, {"name": 1})
    check(profile["name"] == name, "the profile shows the old name")
print(f"{version}: 6 renames")
