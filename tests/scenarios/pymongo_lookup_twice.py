"""N5: one aggregate with a single $lookup (posts joined with their authors), run only twice, among
50 ordinary finds (users logging in by email, served by a unique index the application creates).

mongotap should report nothing (no lookup_chain, no n_plus_one, no redundant_query, no missing_index).
"""
from common import args, check, fresh_db, seed_blog

uri, dbname = args()
client, db = fresh_db(uri, dbname)
seed_blog(db, users=60)
db.users.create_index("email", unique=True)


def recent_posts():
    return list(db.posts.aggregate([
        {"$sort": {"_id": -1}},
        {"$limit": 20},
        {"$lookup": {"from": "users", "localField": "authorId", "foreignField": "_id", "as": "author"}},
        {"$project": {"title": 1, "author.name": 1}},
    ]))


for round_ in range(2):
    check(len(recent_posts()) == 20, "aggregate returned too few posts")
    for k in range(25):
        email = f"user{round_ * 25 + k}@example.com"
        check(db.users.find_one({"email": email}) is not None, f"no user {email}")
print("2 aggregates with one $lookup, 50 finds by email")
