"""N11: N8's concurrency trap with a SMALL population: 40 users, the posts written by 12 of them. For ~8 s
one thread renders the front page (20 posts, their authors with ONE $in query, 20 ms apart), clicking
through 30 pages, while 3 threads read the profile of a random one of the 40 users, users.find_one({_id}),
as fast as they can: about 1 in 4 profile reads asks for an author of the page just rendered, though none
is a child of it. (A page comes back about 1 s later, past redundant_gap_ms: the same page every 20 ms
would be a redundant_query on posts and users.)

mongotap should report no n_plus_one (the reads are not the page's children, most ask for users the page did
not return) and no redundant_query (40 values are too many to repeat). It does say the page needs two round
trips for the author names, read with every post and rarely changed: extended_reference_candidate on
DB.posts -> DB.users (copy the name into the posts).
"""
import random

from common import args, fresh_db, front_page_and_profiles, seed_blog

DURATION = 8.0
uri, dbname = args()
client, db = fresh_db(uri, dbname, maxPoolSize=10)
authors = random.Random(11).choices(range(12), k=600)  # the 30 pages differ in their sets of authors
user_ids = seed_blog(db, users=40, posts=600, author_of=authors.__getitem__)


def any_user(rng):
    while True:
        yield rng.choice(user_ids)


pages, profiles = front_page_and_profiles(db, duration=DURATION, pages=30, readers=3, next_user=any_user)
print(f"{pages} front pages, {profiles} profile reads of 40 users in {DURATION:.0f} s")
