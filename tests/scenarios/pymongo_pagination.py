"""N7: keyset pagination. An export walks all posts in pages of 20, each page asking for
{_id: {$gt: <last _id of the previous page>}}: every query uses a value from the previous reply,
but each reply is followed by a single query.

mongotap should report nothing (no n_plus_one, no redundant_query).
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db, posts=300)

seen, pages, last = 0, 0, None
while True:
    query = {} if last is None else {"_id": {"$gt": last}}
    page = list(db.posts.find(query, {"title": 1}).sort("_id", 1).limit(20))
    pages += 1
    if not page:
        break
    seen += len(page)
    last = page[-1]["_id"]
check(seen == 300, f"walked {seen} posts, expected 300")
print(f"walked 300 posts in {pages} queries")
