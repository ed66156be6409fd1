"""N8: concurrent, independent traffic. For ~10 s one thread renders the front page (posts + one $in
batch for their authors) while 4 threads serve profile pages, users.find_one({_id}) for random users:
the same users that write the posts, so many profile reads hit a value of a recent page's reply.

mongotap should report nothing (no n_plus_one, no redundant_query).
"""
from common import args, fresh_db, front_page_and_profiles, seed_blog

DURATION = 10.0
uri, dbname = args()
client, db = fresh_db(uri, dbname, maxPoolSize=10)
user_ids = seed_blog(db, users=1000, posts=1000, author_of=lambda i: (i * 7) % 1000)


def every_user_once_per_round(rng):
    while True:
        order = user_ids[:]
        rng.shuffle(order)
        yield from order


pages, profiles = front_page_and_profiles(db, duration=DURATION, pages=50, readers=4,
                                          next_user=every_user_once_per_round)
print(f"{pages} front pages, {profiles} profile reads in {DURATION:.0f} s")
