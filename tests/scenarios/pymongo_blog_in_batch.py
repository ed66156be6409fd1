"""N1: P1's front page done right: the page's authors are loaded with one find({_id: {$in: ids}}).

mongotap should report no n_plus_one and no redundant_query. The relationship map still says the page
needs a second round trip for author names read with every post and never changed: an extended reference
(extended_reference_candidate on DB.posts -> DB.users), as for mongoengine's select_related() and
Mongoose's populate().
"""
import time

from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db)

for page in range(10):
    posts = list(db.posts.find().sort("_id", -1).skip(page * 4).limit(20))
    ids = list({post["authorId"] for post in posts})
    authors = {u["_id"]: u for u in db.users.find({"_id": {"$in": ids}}, {"name": 1})}
    check(all(post["authorId"] in authors for post in posts), "an author is missing")
    time.sleep(0.06)  # a reader between two pages: longer than the operations' 50 ms gap
print("10 pages, one $in batch each")
